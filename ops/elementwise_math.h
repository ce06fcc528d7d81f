// The arithmetic of the element-wise ops, written once for the CPU kernels and the GPU kernels
// (ops/cuda/): each op is a functor with a static `apply`, a host and device function under nvcc and
// a plain function otherwise. The CPU kernels run these very functions, so the conformance tests of
// the CPU kernels (plain loops, numeric gradients, TensorFlow's values) check the GPU's arithmetic too.
#pragma once

#include <cmath>
#include <limits>
#include <type_traits>

#ifdef __CUDACC__
#define MIRRA_HOST_DEVICE __host__ __device__
#else
#define MIRRA_HOST_DEVICE
#endif

namespace mirra::ops::math {

// ---- Unary (f32, f64; LogicalNot: bool) ----
struct Neg { template <class T> MIRRA_HOST_DEVICE static T apply(T x) { return -x; } };
struct Exp { template <class T> MIRRA_HOST_DEVICE static T apply(T x) { return std::exp(x); } };
struct Log { template <class T> MIRRA_HOST_DEVICE static T apply(T x) { return std::log(x); } };
struct Sqrt { template <class T> MIRRA_HOST_DEVICE static T apply(T x) { return std::sqrt(x); } };
struct Rsqrt { template <class T> MIRRA_HOST_DEVICE static T apply(T x) { return T(1) / std::sqrt(x); } };
struct Square { template <class T> MIRRA_HOST_DEVICE static T apply(T x) { return x * x; } };
struct Relu { template <class T> MIRRA_HOST_DEVICE static T apply(T x) { return x > T(0) ? x : T(0); } };
struct Sigmoid { template <class T> MIRRA_HOST_DEVICE static T apply(T x) { return T(1) / (T(1) + std::exp(-x)); } };
struct Tanh { template <class T> MIRRA_HOST_DEVICE static T apply(T x) { return std::tanh(x); } };
struct Abs { template <class T> MIRRA_HOST_DEVICE static T apply(T x) { return std::fabs(x); } };
// -1, 0 or 1 (+0 for either zero); NaN stays NaN.
struct Sign {
  template <class T>
  MIRRA_HOST_DEVICE static T apply(T x) {
    return x > T(0) ? T(1) : x < T(0) ? T(-1) : x == x ? T(0) : x;
  }
};
struct Erf { template <class T> MIRRA_HOST_DEVICE static T apply(T x) { return std::erf(x); } };
// log(1 + e^x), as max(x, 0) + log1p(e^-|x|): no overflow for large x, no lost digits for small.
struct Softplus {
  template <class T>
  MIRRA_HOST_DEVICE static T apply(T x) {
    return (x > T(0) ? x : T(0)) + std::log1p(std::exp(-std::fabs(x)));
  }
};
// GELU, x * P(X <= x) for a standard normal X: exactly, with erf (TensorFlow's approximate=False,
// PyTorch's default), or with tanh (approximate=True, GPT-2's).
struct Gelu {
  template <class T>
  MIRRA_HOST_DEVICE static T apply(T x) {
    return T(0.5) * x * (T(1) + std::erf(x * T(0.70710678118654752440)));
  }
};
struct GeluTanh {
  template <class T>
  MIRRA_HOST_DEVICE static T apply(T x) {
    return T(0.5) * x * (T(1) + std::tanh(T(0.79788456080286535588) * (x + T(0.044715) * x * x * x)));
  }
};

// dy times GELU's derivative: Phi(x) + x phi(x) for the exact form; for the tanh form, with t =
// tanh(k (x + a x^3)), (1 + t) / 2 + x / 2 (1 - t^2) k (1 + 3 a x^2).
template <class T>
MIRRA_HOST_DEVICE T gelu_grad(T dy, T x) {
  const T cdf = T(0.5) * (T(1) + std::erf(x * T(0.70710678118654752440)));
  const T pdf = T(0.39894228040143267794) * std::exp(T(-0.5) * x * x);
  return dy * (cdf + x * pdf);
}
template <class T>
MIRRA_HOST_DEVICE T gelu_tanh_grad(T dy, T x) {
  const T k = T(0.79788456080286535588), a = T(0.044715);
  const T t = std::tanh(k * (x + a * x * x * x));
  return dy * (T(0.5) * (T(1) + t) + T(0.5) * x * (T(1) - t * t) * k * (T(1) + T(3) * a * x * x));
}

// LeakyRelu's slope as TensorFlow holds it: a 32-bit float attribute, whatever the dtype of x.
inline double leaky_relu_alpha(double alpha) { return static_cast<float>(alpha); }
// x where x > 0, else alpha * x (TensorFlow's LeakyRelu; its attribute alpha is a run-time value).
template <class T>
MIRRA_HOST_DEVICE T leaky_relu(T x, T alpha) {
  return x > T(0) ? x : x * alpha;
}
struct LogicalNot { template <class T> MIRRA_HOST_DEVICE static bool apply(T x) { return !x; } };

// The gradient of Relu from its output: dy where y > 0.
template <class T>
MIRRA_HOST_DEVICE T relu_grad(T dy, T y) {
  return y > T(0) ? dy : T(0);
}

// ---- Binary (f32, f64, i32, i64; Pow: f32, f64; LogicalAnd and LogicalOr: bool) ----
struct Add { template <class T> MIRRA_HOST_DEVICE static T apply(T x, T y) { return x + y; } };
struct Sub { template <class T> MIRRA_HOST_DEVICE static T apply(T x, T y) { return x - y; } };
struct Mul { template <class T> MIRRA_HOST_DEVICE static T apply(T x, T y) { return x * y; } };
struct Div {
  template <class T>
  MIRRA_HOST_DEVICE static T apply(T x, T y) {
    // INT_MIN / -1 overflows (and traps); negate through unsigned instead, wrapping as numpy does.
    if constexpr (std::is_integral_v<T>) {
      if (y == T(-1)) return static_cast<T>(std::make_unsigned_t<T>(0) - static_cast<std::make_unsigned_t<T>>(x));
    }
    return x / y;
  }
};
// NaN wins, as in TensorFlow.
struct Maximum { template <class T> MIRRA_HOST_DEVICE static T apply(T x, T y) { return (x < y || y != y) ? y : x; } };
struct Minimum { template <class T> MIRRA_HOST_DEVICE static T apply(T x, T y) { return (y < x || y != y) ? y : x; } };
// x^y as the C library defines it (floats only): pow(x, 0) = 1, a negative x to a fractional y is NaN.
struct Pow { template <class T> MIRRA_HOST_DEVICE static T apply(T x, T y) { return std::pow(x, y); } };
// Comparisons, to bool; any comparison with NaN is false but NotEqual's.
struct Equal { template <class T> MIRRA_HOST_DEVICE static bool apply(T x, T y) { return x == y; } };
struct NotEqual { template <class T> MIRRA_HOST_DEVICE static bool apply(T x, T y) { return x != y; } };
struct Less { template <class T> MIRRA_HOST_DEVICE static bool apply(T x, T y) { return x < y; } };
struct LessEqual { template <class T> MIRRA_HOST_DEVICE static bool apply(T x, T y) { return x <= y; } };
struct Greater { template <class T> MIRRA_HOST_DEVICE static bool apply(T x, T y) { return x > y; } };
struct GreaterEqual { template <class T> MIRRA_HOST_DEVICE static bool apply(T x, T y) { return x >= y; } };
// Of bools only.
struct LogicalAnd { template <class T> MIRRA_HOST_DEVICE static bool apply(T x, T y) { return x && y; } };
struct LogicalOr { template <class T> MIRRA_HOST_DEVICE static bool apply(T x, T y) { return x || y; } };

// Whether a binary op's output is bool (a comparison or a logical op) rather than its inputs' dtype.
template <class Op>
inline constexpr bool kBoolOutput = std::is_same_v<decltype(Op::template apply<float>(0.0f, 0.0f)), bool>;

// ---- Range ----

// Element i of a range: start + i * delta in T, as TensorFlow computes it: for floats rounded after
// the product and after the sum (never one fused rounding), for integers exact (the sum through
// unsigned arithmetic, whose wrap-around the final value, inside the range, undoes).
template <class T>
MIRRA_HOST_DEVICE T range_element(T start, T delta, int64_t i) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(start) + static_cast<U>(i) * static_cast<U>(delta));
  } else {
#ifdef __CUDA_ARCH__
    if constexpr (std::is_same_v<T, float>) return __fadd_rn(start, __fmul_rn(static_cast<float>(i), delta));
    if constexpr (std::is_same_v<T, double>) return __dadd_rn(start, __dmul_rn(static_cast<double>(i), delta));
#endif
    return start + static_cast<T>(i) * delta;
  }
}

// ---- Cast ----

// Converts one value; floats to integers saturate and NaN becomes 0 (a plain cast would be undefined).
template <class To, class From>
MIRRA_HOST_DEVICE To convert(From value) {
  if constexpr (std::is_same_v<To, bool>) {
    return value != From(0);
  } else if constexpr (std::is_floating_point_v<From> && std::is_integral_v<To>) {
    if (std::isnan(value)) return To(0);
    if (value <= static_cast<From>(std::numeric_limits<To>::lowest())) return std::numeric_limits<To>::lowest();
    if (value >= static_cast<From>(std::numeric_limits<To>::max())) return std::numeric_limits<To>::max();
    return static_cast<To>(value);
  } else {
    return static_cast<To>(value);
  }
}

// ---- Optimizer updates of one element (f32, f64) ----

// Momentum: accumulator = momentum * accumulator + gradient; variable -= learning_rate * accumulator
// (Nesterov: learning_rate * (gradient + momentum * accumulator)); with kDecay the variable is first
// scaled by decay (decoupled weight decay, SGDW).
template <class T, bool kNesterov, bool kDecay = false>
struct MomentumUpdate {
  T learning_rate, momentum;
  T decay = T(1);  // kDecay: the variable is scaled by it before the update
  MIRRA_HOST_DEVICE void apply(T& variable, T& accumulator, T gradient) const {
    const T accumulated = momentum * accumulator + gradient;
    accumulator = accumulated;
    if constexpr (kDecay) variable *= decay;
    variable -= learning_rate * (kNesterov ? gradient + momentum * accumulated : accumulated);
  }
};

template <class T, bool kDecay = false>
struct GradientDescentUpdate {
  T learning_rate;
  T decay = T(1);  // kDecay: the variable is scaled by it before the update
  MIRRA_HOST_DEVICE void apply(T& variable, T gradient) const {
    if constexpr (kDecay) variable *= decay;
    variable -= learning_rate * gradient;
  }
};

// 1 - learning_rate * weight_decay: what decoupled weight decay scales a variable by each step.
template <class T>
MIRRA_HOST_DEVICE T decay_factor(T learning_rate, double weight_decay) {
  return static_cast<T>(1.0 - static_cast<double>(learning_rate) * weight_decay);
}

// Adam with bias correction folded into step_size = lr / (1 - beta1^t) and inverse_sqrt_correction2 =
// 1 / sqrt(1 - beta2^t); decay = 1 - lr * weight_decay is AdamW's decoupled weight decay.
template <class T>
struct AdamUpdate {
  T beta1, beta2, step_size, inverse_sqrt_correction2, decay, epsilon;
  MIRRA_HOST_DEVICE void apply(T& variable, T& first_moment, T& second_moment, T gradient) const {
    first_moment = beta1 * first_moment + (T(1) - beta1) * gradient;
    second_moment = beta2 * second_moment + (T(1) - beta2) * gradient * gradient;
    variable = decay * variable - step_size * first_moment / (std::sqrt(second_moment) * inverse_sqrt_correction2 + epsilon);
  }
};

}  // namespace mirra::ops::math
