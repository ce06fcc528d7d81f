// CUDA kernels of the element-wise ops: unary functions, LeakyRelu, LogicalNot, ReluGrad,
// broadcasting binary functions, SelectV2, BiasAdd, Cast, Fill and Range, each a grid-stride loop
// around ops/elementwise_math.h, and CheckNumerics's count of non-finite values.
#include <type_traits>

#include "ops/cuda/launch.cuh"
#include "ops/cuda/sixteen_bit.cuh"
#include "ops/elementwise_math.h"

namespace mirra::ops::cuda {

namespace {

// One element, as the CPU's Cast converts it: the 16-bit floats go through float (exact from them,
// rounded once to them, except from f64, which rounds to float first).
template <class To, class From>
__device__ To converted(From x) {
  if constexpr (kSixteenBitFloat<From>) {
    return converted<To>(widened(x));
  } else if constexpr (kSixteenBitFloat<To>) {
    return narrowed<To>(math::convert<float>(x));
  } else {
    return math::convert<To>(x);
  }
}

template <class Op, class T>
__global__ void unary_kernel(const T* x, T* y, int64_t n) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) y[i] = Op::template apply<T>(x[i]);
}

template <class T>
__global__ void leaky_relu_kernel(const T* x, T* y, T alpha, int64_t n) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) y[i] = math::leaky_relu(x[i], alpha);
}

__global__ void logical_not_kernel(const bool* x, bool* y, int64_t n) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) y[i] = math::LogicalNot::apply(x[i]);
}

template <class T, bool kTanh>
__global__ void gelu_grad_kernel(const T* dy, const T* x, T* dx, int64_t n) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) dx[i] = kTanh ? math::gelu_tanh_grad(dy[i], x[i]) : math::gelu_grad(dy[i], x[i]);
}

template <class T>
__global__ void relu_grad_kernel(const T* dy, const T* y, T* dx, int64_t n) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) dx[i] = math::relu_grad(dy[i], y[i]);
}

template <class Op, class T, class Out>
__global__ void same_shape_kernel(const T* x, const T* y, Out* out, int64_t n) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) out[i] = Op::template apply<T>(x[i], y[i]);
}

template <class Op, class T, class Out>
__global__ void broadcast_kernel(const T* x, const T* y, Out* out, BroadcastGeometry g) {
  for (int64_t i = first_index(); i < g.elements; i += grid_stride()) {
    int64_t rest = i, ix = 0, iy = 0;
    for (int d = g.rank - 1; d >= 0; --d) {
      const int64_t coordinate = rest % g.dims[d];
      rest /= g.dims[d];
      ix += coordinate * g.x_strides[d];
      iy += coordinate * g.y_strides[d];
    }
    out[i] = Op::template apply<T>(x[ix], y[iy]);
  }
}

template <class E>
__global__ void select_kernel(const bool* condition, const E* then_value, const E* else_value, E* out, SelectGeometry g) {
  const BroadcastGeometry& v = g.values;
  for (int64_t i = first_index(); i < v.elements; i += grid_stride()) {
    int64_t rest = i, ic = 0, it = 0, ie = 0;
    for (int d = v.rank - 1; d >= 0; --d) {
      const int64_t coordinate = rest % v.dims[d];
      rest /= v.dims[d];
      ic += coordinate * g.condition_strides[d];
      it += coordinate * v.x_strides[d];
      ie += coordinate * v.y_strides[d];
    }
    out[i] = condition[ic] ? then_value[it] : else_value[ie];
  }
}

template <class T>
__global__ void range_kernel(T start, T delta, T* y, int64_t n) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) y[i] = math::range_element(start, delta, i);
}

template <class T>
__global__ void bias_add_kernel(const T* x, const T* bias, T* y, int64_t n, int64_t channels, int64_t inner) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) y[i] = x[i] + bias[(i / inner) % channels];
}

template <class To, class From>
__global__ void cast_kernel(const From* x, To* y, int64_t n) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) y[i] = converted<To>(x[i]);
}

template <class T>
__global__ void fill_kernel(T value, T* y, int64_t n) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) y[i] = value;
}

template <class T>
__global__ void count_non_finite_kernel(const T* x, int64_t n, unsigned long long* counts) {
  unsigned long long nans = 0, infinities = 0;
  for (int64_t i = first_index(); i < n; i += grid_stride()) {
    nans += std::isnan(x[i]);
    infinities += std::isinf(x[i]);
  }
  if (nans > 0) atomicAdd(&counts[0], nans);
  if (infinities > 0) atomicAdd(&counts[1], infinities);
}

template <class Op, class T>
cudaError_t launch_unary(const void* x, void* y, int64_t n, cudaStream_t stream) {
  return launch(unary_kernel<Op, T>, blocks_for(n), kThreads, stream, static_cast<const T*>(x), static_cast<T*>(y), n);
}

template <class Op, class T>
cudaError_t launch_binary(const void* x, const void* y, void* out, const BroadcastGeometry& g, cudaStream_t stream) {
  using Out = std::conditional_t<math::kBoolOutput<Op>, bool, T>;
  const auto* px = static_cast<const T*>(x);
  const auto* py = static_cast<const T*>(y);
  auto* po = static_cast<Out*>(out);
  bool same_shape = true;
  for (int d = 0; d < g.rank; ++d) same_shape = same_shape && g.x_strides[d] == g.y_strides[d] && (g.dims[d] == 1 || g.x_strides[d] != 0);
  if (same_shape) {
    return launch(same_shape_kernel<Op, T, Out>, blocks_for(g.elements), kThreads, stream, px, py, po, g.elements);
  } else {
    return launch(broadcast_kernel<Op, T, Out>, blocks_for(g.elements), kThreads, stream, px, py, po, g);
  }
}

}  // namespace

cudaError_t unary(UnaryOp op, DType dtype, const void* x, void* y, int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return visit<float, double>(dtype, [&]<class T>(T) {
    switch (op) {
      case UnaryOp::neg: return launch_unary<math::Neg, T>(x, y, n, stream);
      case UnaryOp::exp: return launch_unary<math::Exp, T>(x, y, n, stream);
      case UnaryOp::log: return launch_unary<math::Log, T>(x, y, n, stream);
      case UnaryOp::sqrt: return launch_unary<math::Sqrt, T>(x, y, n, stream);
      case UnaryOp::rsqrt: return launch_unary<math::Rsqrt, T>(x, y, n, stream);
      case UnaryOp::square: return launch_unary<math::Square, T>(x, y, n, stream);
      case UnaryOp::relu: return launch_unary<math::Relu, T>(x, y, n, stream);
      case UnaryOp::sigmoid: return launch_unary<math::Sigmoid, T>(x, y, n, stream);
      case UnaryOp::tanh: return launch_unary<math::Tanh, T>(x, y, n, stream);
      case UnaryOp::abs: return launch_unary<math::Abs, T>(x, y, n, stream);
      case UnaryOp::sign: return launch_unary<math::Sign, T>(x, y, n, stream);
      case UnaryOp::erf: return launch_unary<math::Erf, T>(x, y, n, stream);
      case UnaryOp::softplus: return launch_unary<math::Softplus, T>(x, y, n, stream);
      case UnaryOp::gelu: return launch_unary<math::Gelu, T>(x, y, n, stream);
      case UnaryOp::gelu_tanh: return launch_unary<math::GeluTanh, T>(x, y, n, stream);
    }
    return cudaErrorNotSupported;
  });
}

cudaError_t leaky_relu(DType dtype, double alpha, const void* x, void* y, int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return visit<float, double>(dtype, [&]<class T>(T) {
    return launch(leaky_relu_kernel<T>, blocks_for(n), kThreads, stream, static_cast<const T*>(x), static_cast<T*>(y),
        static_cast<T>(alpha), n);
  });
}

cudaError_t logical_not(const bool* x, bool* y, int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return launch(logical_not_kernel, blocks_for(n), kThreads, stream, x, y, n);
}

cudaError_t gelu_grad(DType dtype, bool approximate, const void* dy, const void* x, void* dx, int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return visit<float, double>(dtype, [&]<class T>(T) {
    const auto* pdy = static_cast<const T*>(dy);
    const auto* px = static_cast<const T*>(x);
    auto* pdx = static_cast<T*>(dx);
    return approximate ? launch(gelu_grad_kernel<T, true>, blocks_for(n), kThreads, stream, pdy, px, pdx, n)
                       : launch(gelu_grad_kernel<T, false>, blocks_for(n), kThreads, stream, pdy, px, pdx, n);
  });
}

cudaError_t relu_grad(DType dtype, const void* dy, const void* y, void* dx, int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return visit<float, double>(dtype, [&]<class T>(T) {
    return launch(relu_grad_kernel<T>, blocks_for(n), kThreads, stream, static_cast<const T*>(dy), static_cast<const T*>(y),
        static_cast<T*>(dx), n);
  });
}

cudaError_t binary(BinaryOp op, DType dtype, const void* x, const void* y, void* out, const BroadcastGeometry& geometry,
                   cudaStream_t stream) {
  if (geometry.elements == 0) return cudaSuccess;
  if (is_logical(op)) {
    if (dtype != DType::boolean) return cudaErrorNotSupported;
    return op == BinaryOp::logical_and ? launch_binary<math::LogicalAnd, bool>(x, y, out, geometry, stream)
                                       : launch_binary<math::LogicalOr, bool>(x, y, out, geometry, stream);
  }
  return visit<float, double, int32_t, int64_t>(dtype, [&]<class T>(T) {
    switch (op) {
      case BinaryOp::add: return launch_binary<math::Add, T>(x, y, out, geometry, stream);
      case BinaryOp::sub: return launch_binary<math::Sub, T>(x, y, out, geometry, stream);
      case BinaryOp::mul: return launch_binary<math::Mul, T>(x, y, out, geometry, stream);
      case BinaryOp::div:
        if constexpr (std::is_floating_point_v<T>) return launch_binary<math::Div, T>(x, y, out, geometry, stream);
        return cudaErrorNotSupported;
      case BinaryOp::maximum: return launch_binary<math::Maximum, T>(x, y, out, geometry, stream);
      case BinaryOp::minimum: return launch_binary<math::Minimum, T>(x, y, out, geometry, stream);
      case BinaryOp::pow:
        if constexpr (std::is_floating_point_v<T>) return launch_binary<math::Pow, T>(x, y, out, geometry, stream);
        return cudaErrorNotSupported;
      case BinaryOp::equal: return launch_binary<math::Equal, T>(x, y, out, geometry, stream);
      case BinaryOp::not_equal: return launch_binary<math::NotEqual, T>(x, y, out, geometry, stream);
      case BinaryOp::less: return launch_binary<math::Less, T>(x, y, out, geometry, stream);
      case BinaryOp::less_equal: return launch_binary<math::LessEqual, T>(x, y, out, geometry, stream);
      case BinaryOp::greater: return launch_binary<math::Greater, T>(x, y, out, geometry, stream);
      case BinaryOp::greater_equal: return launch_binary<math::GreaterEqual, T>(x, y, out, geometry, stream);
      case BinaryOp::logical_and:
      case BinaryOp::logical_or: return cudaErrorNotSupported;  // bools only, above
    }
    return cudaErrorNotSupported;
  });
}

cudaError_t select(size_t element_size, const bool* condition, const void* then_value, const void* else_value, void* out,
                   const SelectGeometry& geometry, cudaStream_t stream) {
  const int64_t n = geometry.values.elements;
  if (n == 0) return cudaSuccess;
  const auto run = [&]<class E>(E) {
    return launch(select_kernel<E>, blocks_for(n), kThreads, stream, condition, static_cast<const E*>(then_value),
        static_cast<const E*>(else_value), static_cast<E*>(out), geometry);
  };
  switch (element_size) {
    case 1: return run(uint8_t{});
    case 2: return run(uint16_t{});
    case 4: return run(uint32_t{});
    case 8: return run(uint64_t{});
    default: return cudaErrorNotSupported;
  }
}

cudaError_t range(DType dtype, double start, double delta, void* y, int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return visit<float, double, int32_t, int64_t>(dtype, [&]<class T>(T) {
    return launch(range_kernel<T>, blocks_for(n), kThreads, stream, static_cast<T>(start), static_cast<T>(delta), static_cast<T*>(y), n);
  });
}

cudaError_t bias_add(DType dtype, const void* x, const void* bias, void* y, int64_t n, int64_t channels, int64_t inner,
                     cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return visit<float, double>(dtype, [&]<class T>(T) {
    return launch(bias_add_kernel<T>, blocks_for(n), kThreads, stream, static_cast<const T*>(x), static_cast<const T*>(bias),
        static_cast<T*>(y), n, channels, inner);
  });
}

cudaError_t cast(DType from, DType to, const void* x, void* y, int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  using graph::bfloat16, graph::float16;
  return visit<float, double, int32_t, int64_t, uint8_t, bool, bfloat16, float16>(from, [&]<class From>(From) {
    return visit<float, double, int32_t, int64_t, uint8_t, bool, bfloat16, float16>(to, [&]<class To>(To) {
      return launch(cast_kernel<To, From>, blocks_for(n), kThreads, stream, static_cast<const From*>(x), static_cast<To*>(y), n);
    });
  });
}

cudaError_t count_non_finite(DType dtype, const void* x, int64_t n, unsigned long long* counts, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return visit<float, double>(dtype, [&]<class T>(T) {
    return launch(count_non_finite_kernel<T>, blocks_for(n), kThreads, stream, static_cast<const T*>(x), n, counts);
  });
}

cudaError_t fill(DType dtype, double value, void* y, int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  using graph::bfloat16, graph::float16;
  return visit<float, double, int32_t, int64_t, uint8_t, bool, bfloat16, float16>(dtype, [&]<class T>(T) {
    // On the host; a 16-bit float through its float (math::convert is also device code, their
    // constructors are host code).
    T converted;
    if constexpr (std::is_same_v<T, bfloat16> || std::is_same_v<T, float16>) {
      converted = T(static_cast<float>(value));
    } else {
      converted = math::convert<T>(value);
    }
    return launch(fill_kernel<T>, blocks_for(n), kThreads, stream, converted, static_cast<T*>(y), n);
  });
}

}  // namespace mirra::ops::cuda
