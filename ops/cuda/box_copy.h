// Box copies between dense row-major tensors, as the GPU's copy_box kernel takes them: a box moved
// from one origin to another (Slice, Pad, Concat, Split) or a whole tensor with its dims permuted
// (Transpose, filter layouts for cuDNN), or repeated (Tile).
#pragma once

#include <span>

#include "ops/cuda/gpu_kernel.h"

namespace mirra::ops::cuda {

// The box `dims` at `from_origin` of a `from`-shaped tensor, to `to_origin` of a `to`-shaped one.
BoxCopy box_between(const TensorShape& from, const int64_t* from_origin, const TensorShape& to, const int64_t* to_origin,
                    const TensorShape& dims);
// All of a `from`-shaped tensor into the shape whose dim d is from's dim perm[d].
BoxCopy permutation(const TensorShape& from, std::span<const int64_t> perm);
TensorShape permuted_shape(const TensorShape& from, std::span<const int64_t> perm);
// All of the output of tiling a `from`-shaped tensor `multiples` times (its dims split into the tile
// and the place in it, where the multiple is not 1); an error when that takes more than kMaxRank dims.
graph::Expected<BoxCopy> tiling(const TensorShape& from, std::span<const int64_t> multiples);
// Launches the copy of `box` from `from` to `to` on the node's stream.
Status copy(const KernelContext& ctx, const Tensor& from, Tensor& to, const BoxCopy& box);

}  // namespace mirra::ops::cuda
