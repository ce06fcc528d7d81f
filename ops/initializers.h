// Variable initialisers: zeros, ones, constant, Glorot (Xavier) and He, uniform and truncated normal,
// a plain normal of a given standard deviation (GPT-2's and PyTorch's nn.init.normal_),
// each drawn from the variable's own seed, so the same graph seed gives the same weights. Fans follow
// Keras: a matrix [in, out]; a conv filter [h, w, in, out] has fan_in = h*w*in, fan_out = h*w*out.
#pragma once

#include <string>
#include <string_view>

#include "graph/status.h"
#include "graph/tensor_type.h"
#include "runtime/kernel.h"
#include "runtime/tensor.h"

namespace mirra::ops {

struct Initializer {
  std::string kind = "zeros";  // zeros, ones, constant, glorot_uniform, glorot_normal, he_uniform, he_normal, normal
  double value = 0.0;          // for "constant"; the standard deviation for "normal" (mean 0, not truncated)

  static Initializer zeros() { return {"zeros"}; }
  static Initializer ones() { return {"ones"}; }
  static Initializer constant(double v) { return {"constant", v}; }
  static Initializer glorot_uniform() { return {"glorot_uniform"}; }
  static Initializer glorot_normal() { return {"glorot_normal"}; }
  static Initializer he_uniform() { return {"he_uniform"}; }
  static Initializer he_normal() { return {"he_normal"}; }
  static Initializer normal(double stddev) { return {"normal", stddev}; }
};

bool is_known_initializer(std::string_view kind);

// Fills `out` (f32 or f64) as `kind` says, drawing from `seed`.
graph::Status fill_initial_value(std::string_view kind, double value, uint64_t seed, runtime::Tensor& out);

// A Variable node's first value, from `allocator` (host memory): its initialiser's over its shape;
// for a part of a variable cut along axis 0 (attrs partition_of, the whole's shape, and
// partition_offset, its first row), those rows of the whole's initial value, so that the parts start
// as the whole would.
graph::Expected<runtime::Tensor> initial_variable_value(const runtime::KernelContext& ctx,
                                                        const std::shared_ptr<runtime::Allocator>& allocator);

}  // namespace mirra::ops
