// Box copy geometry.
#include "ops/cuda/box_copy.h"

namespace mirra::ops::cuda {

namespace {

// Row-major strides of `shape`, in elements.
void dense_strides(const TensorShape& shape, int64_t* strides) {
  int64_t stride = 1;
  for (int d = shape.rank() - 1; d >= 0; --d) {
    strides[d] = stride;
    stride *= shape.dim(d);
  }
}

}  // namespace

BoxCopy box_between(const TensorShape& from, const int64_t* from_origin, const TensorShape& to, const int64_t* to_origin,
                    const TensorShape& dims) {
  BoxCopy box;
  box.rank = dims.rank();
  box.elements = dims.num_elements();
  dense_strides(from, box.from_strides);
  dense_strides(to, box.to_strides);
  for (int d = 0; d < box.rank; ++d) {
    box.dims[d] = dims.dim(d);
    box.from_offset += from_origin[d] * box.from_strides[d];
    box.to_offset += to_origin[d] * box.to_strides[d];
  }
  return box;
}

TensorShape permuted_shape(const TensorShape& from, std::span<const int64_t> perm) {
  TensorShape out = from;
  for (int d = 0; d < from.rank(); ++d) out.set_dim(d, from.dim(static_cast<int>(perm[static_cast<size_t>(d)])));
  return out;
}

BoxCopy permutation(const TensorShape& from, std::span<const int64_t> perm) {
  int64_t from_strides[kMaxRank] = {};
  dense_strides(from, from_strides);
  const TensorShape to = permuted_shape(from, perm);
  BoxCopy box;
  box.rank = from.rank();
  box.elements = from.num_elements();
  dense_strides(to, box.to_strides);
  for (int d = 0; d < box.rank; ++d) {
    box.dims[d] = to.dim(d);
    box.from_strides[d] = from_strides[perm[static_cast<size_t>(d)]];
  }
  return box;
}

graph::Expected<BoxCopy> tiling(const TensorShape& from, std::span<const int64_t> multiples) {
  int64_t from_strides[kMaxRank] = {};
  dense_strides(from, from_strides);
  BoxCopy box;
  box.elements = 1;
  int64_t to_stride = 1;
  // From the last dim back: the place within a tile, then which tile (stride 0 in `from`).
  int64_t dims[2 * kMaxRank], in_strides[2 * kMaxRank], out_strides[2 * kMaxRank];
  int rank = 0;
  for (int d = from.rank() - 1; d >= 0; --d) {
    const int64_t m = multiples[static_cast<size_t>(d)];
    if (m == 1 || from.dim(d) != 1) {
      dims[rank] = from.dim(d);
      in_strides[rank] = from_strides[d];
      out_strides[rank++] = to_stride;
    }
    if (m != 1) {
      dims[rank] = m;
      in_strides[rank] = 0;
      out_strides[rank++] = to_stride * from.dim(d);
    }
    to_stride *= from.dim(d) * m;
    box.elements *= from.dim(d) * m;
  }
  if (rank > kMaxRank) {
    return graph::unimplemented("tiling " + from.to_string() + " needs " + std::to_string(rank) + " dims, more than the " +
                                std::to_string(kMaxRank) + " a GPU box copy walks");
  }
  box.rank = rank;
  for (int i = 0; i < rank; ++i) {
    box.dims[i] = dims[rank - 1 - i];
    box.from_strides[i] = in_strides[rank - 1 - i];
    box.to_strides[i] = out_strides[rank - 1 - i];
  }
  return box;
}

Status copy(const KernelContext& ctx, const Tensor& from, Tensor& to, const BoxCopy& box) {
  return launched(copy_box(graph::dtype_size(from.dtype()), from.raw_data(), to.mutable_raw_data(), box, stream_of(ctx)),
                  "copy_box");
}

}  // namespace mirra::ops::cuda
