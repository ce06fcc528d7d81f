// Initialiser fills.
#include "ops/initializers.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>

#include "ops/cpu/dtype_dispatch.h"
#include "runtime/random.h"

namespace mirra::ops {

namespace {

constexpr std::string_view kKinds[] = {"zeros", "ones", "constant", "glorot_uniform", "glorot_normal", "he_uniform",
                                       "he_normal", "normal"};

struct Fans {
  double in;
  double out;
};

Fans fans_of(const runtime::TensorShape& shape) {
  if (shape.rank() == 0) return {1, 1};
  if (shape.rank() == 1) return {static_cast<double>(shape.dim(0)), static_cast<double>(shape.dim(0))};
  double receptive = 1;
  for (int i = 0; i + 2 < shape.rank(); ++i) receptive *= static_cast<double>(shape.dim(i));
  return {receptive * static_cast<double>(shape.dim(shape.rank() - 2)),
          receptive * static_cast<double>(shape.dim(shape.rank() - 1))};
}

// A normal draw cut at two standard deviations (redrawn outside), as Keras' truncated normal.
double truncated_normal(runtime::Random& rng) {
  for (;;) {
    const double x = rng.normal();
    if (std::abs(x) <= 2.0) return x;
  }
}

}  // namespace

bool is_known_initializer(std::string_view kind) {
  for (std::string_view known : kKinds) {
    if (known == kind) return true;
  }
  return false;
}

graph::Status fill_initial_value(std::string_view kind, double value, uint64_t seed, runtime::Tensor& out) {
  const Fans fans = fans_of(out.shape());
  // The stddev of a normal truncated at 2 sigma is 0.87962566 of the untruncated one.
  constexpr double kTruncatedStddev = 0.87962566103423978;
  runtime::Random rng(seed);
  std::function<double()> draw;
  if (kind == "zeros") {
    draw = [] { return 0.0; };
  } else if (kind == "ones") {
    draw = [] { return 1.0; };
  } else if (kind == "constant") {
    draw = [value] { return value; };
  } else if (kind == "glorot_uniform" || kind == "he_uniform") {
    const double limit = kind == "glorot_uniform" ? std::sqrt(6.0 / (fans.in + fans.out)) : std::sqrt(6.0 / fans.in);
    draw = [&rng, limit] { return (2.0 * rng.uniform() - 1.0) * limit; };
  } else if (kind == "glorot_normal" || kind == "he_normal") {
    const double stddev =
        (kind == "glorot_normal" ? std::sqrt(2.0 / (fans.in + fans.out)) : std::sqrt(2.0 / fans.in)) / kTruncatedStddev;
    draw = [&rng, stddev] { return truncated_normal(rng) * stddev; };
  } else if (kind == "normal") {
    draw = [&rng, value] { return rng.normal() * value; };
  } else {
    return graph::invalid_argument("unknown initializer '" + std::string(kind) + "'");
  }
  if (!graph::is_floating(out.dtype()) && kind != "zeros" && kind != "ones" && kind != "constant") {
    return graph::invalid_argument("initializer '" + std::string(kind) + "' needs a floating variable");
  }
  return cpu::visit_dtype<float, double, int32_t, int64_t>(out.dtype(), [&]<class T>(cpu::Type<T>) {
    T* data = out.mutable_data<T>();
    for (int64_t i = 0; i < out.num_elements(); ++i) data[i] = static_cast<T>(draw());
    return graph::Status();
  });
}

graph::Expected<runtime::Tensor> initial_variable_value(const runtime::KernelContext& ctx,
                                                        const std::shared_ptr<runtime::Allocator>& allocator) {
  const graph::DType dtype = ctx.attr<graph::DType>("dtype");
  const graph::Shape& shape = ctx.attr<graph::Shape>("shape");
  const graph::Shape* whole_shape = ctx.node().attrs.get<graph::Shape>("partition_of");
  runtime::Tensor whole = runtime::Tensor::empty(whole_shape ? runtime::host_allocator() : allocator, dtype,
                                                 runtime::TensorShape((whole_shape ? *whole_shape : shape).dims));
  MIRRA_RETURN_IF_ERROR(fill_initial_value(ctx.attr<std::string>("initializer"), ctx.attr<double>("init_value"),
                                           static_cast<uint64_t>(ctx.attr<int64_t>("seed")), whole));
  if (whole_shape == nullptr) return whole;
  runtime::Tensor part = runtime::Tensor::empty(allocator, dtype, runtime::TensorShape(shape.dims));
  const size_t row_bytes = whole.byte_size() / static_cast<size_t>(std::max<int64_t>(1, whole_shape->dim(0)));
  const size_t first_row = static_cast<size_t>(*ctx.node().attrs.get<int64_t>("partition_offset"));
  if (part.byte_size() > 0) {
    std::memcpy(part.mutable_raw_data(), static_cast<const std::byte*>(whole.raw_data()) + first_row * row_bytes, part.byte_size());
  }
  return part;
}

}  // namespace mirra::ops
