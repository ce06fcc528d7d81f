// CUDA kernels of the training ops: sparse softmax cross-entropy (one thread per example) and the
// optimizer updates, each element updated by ops/elementwise_math.h's update.
#include "ops/cuda/launch.cuh"
#include "ops/elementwise_math.h"

namespace mirra::ops::cuda {

namespace {

template <class T, class L>
__global__ void sparse_xent_kernel(const T* logits, const L* labels, T* loss, T* backprop, int64_t batch, int64_t classes) {
  for (int64_t r = first_index(); r < batch; r += grid_stride()) {
    const T* row = logits + r * classes;
    T* gradient = backprop + r * classes;
    const L label = labels[r];
    if (label < 0 || label >= classes) {
      const T nan = std::numeric_limits<T>::quiet_NaN();
      loss[r] = nan;
      for (int64_t i = 0; i < classes; ++i) gradient[i] = nan;
      continue;
    }
    T max = row[0];
    for (int64_t i = 1; i < classes; ++i) max = row[i] > max ? row[i] : max;
    T sum = 0;
    for (int64_t i = 0; i < classes; ++i) sum += std::exp(row[i] - max);
    const T log_sum = std::log(sum);
    loss[r] = log_sum - (row[label] - max);
    for (int64_t i = 0; i < classes; ++i) gradient[i] = std::exp(row[i] - max - log_sum) - (i == label ? T(1) : T(0));
  }
}

// The updates' scalars are read on the device; a gate that is false leaves the variable alone.
__device__ bool gated_off(const bool* gate) { return gate != nullptr && !*gate; }

template <class T, bool kDecay>
__global__ void gradient_descent_kernel(T* variable, const T* gradient, const T* learning_rate, const bool* gate,
                                        double weight_decay, int64_t n) {
  if (gated_off(gate)) return;
  const T rate = *learning_rate;
  const math::GradientDescentUpdate<T, kDecay> update{rate, math::decay_factor(rate, weight_decay)};
  for (int64_t i = first_index(); i < n; i += grid_stride()) update.apply(variable[i], gradient[i]);
}

template <class T, bool kNesterov, bool kDecay>
__global__ void momentum_kernel(T* variable, T* accumulator, const T* gradient, const T* learning_rate, const bool* gate,
                                T momentum, double weight_decay, int64_t n) {
  if (gated_off(gate)) return;
  const T rate = *learning_rate;
  const math::MomentumUpdate<T, kNesterov, kDecay> update{rate, momentum, math::decay_factor(rate, weight_decay)};
  for (int64_t i = first_index(); i < n; i += grid_stride()) update.apply(variable[i], accumulator[i], gradient[i]);
}

// As the CPU kernel: the bias corrections from the step in double, folded into the update's constants.
template <class T>
__global__ void adam_kernel(T* variable, T* first_moment, T* second_moment, const T* gradient, const T* learning_rate,
                            const int64_t* step, const bool* gate, AdamParameters p, int64_t n) {
  if (gated_off(gate)) return;
  const double rate = static_cast<double>(*learning_rate);
  const double t = static_cast<double>(*step + 1);
  const math::AdamUpdate<T> update{static_cast<T>(p.beta1),
                                   static_cast<T>(p.beta2),
                                   static_cast<T>(rate / (1.0 - pow(p.beta1, t))),
                                   static_cast<T>(1.0 / sqrt(1.0 - pow(p.beta2, t))),
                                   static_cast<T>(1.0 - rate * p.weight_decay),
                                   static_cast<T>(p.epsilon)};
  for (int64_t i = first_index(); i < n; i += grid_stride()) {
    update.apply(variable[i], first_moment[i], second_moment[i], gradient[i]);
  }
}

template <class T>
__global__ void assign_add_kernel(T* variable, const T* delta, const bool* gate, int64_t n) {
  if (gated_off(gate)) return;
  for (int64_t i = first_index(); i < n; i += grid_stride()) variable[i] += delta[i];
}

}  // namespace

cudaError_t sparse_softmax_cross_entropy(DType dtype, DType label_dtype, const void* logits, const void* labels,
                                         void* loss, void* backprop, int64_t batch, int64_t classes, cudaStream_t stream) {
  if (batch == 0 || classes == 0) return cudaSuccess;
  return visit<float, double>(dtype, [&]<class T>(T) {
    return visit<int32_t, int64_t>(label_dtype, [&]<class L>(L) {
      return launch(sparse_xent_kernel<T, L>, blocks_for(batch), kThreads, stream, 
          static_cast<const T*>(logits), static_cast<const L*>(labels), static_cast<T*>(loss), static_cast<T*>(backprop),
          batch, classes);
    });
  });
}

cudaError_t apply_gradient_descent(DType dtype, void* variable, const void* gradient, const void* learning_rate,
                                   const bool* gate, double weight_decay, int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return visit<float, double>(dtype, [&]<class T>(T) {
    auto* v = static_cast<T*>(variable);
    const auto* g = static_cast<const T*>(gradient);
    const auto* rate = static_cast<const T*>(learning_rate);
    const auto kernel = weight_decay != 0 ? gradient_descent_kernel<T, true> : gradient_descent_kernel<T, false>;
    return launch(kernel, blocks_for(n), kThreads, stream, v, g, rate, gate, weight_decay, n);
  });
}

cudaError_t apply_momentum(DType dtype, void* variable, void* accumulator, const void* gradient, const void* learning_rate,
                           const bool* gate, const MomentumParameters& parameters, int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return visit<float, double>(dtype, [&]<class T>(T) {
    auto* v = static_cast<T*>(variable);
    auto* a = static_cast<T*>(accumulator);
    const auto* g = static_cast<const T*>(gradient);
    const auto* rate = static_cast<const T*>(learning_rate);
    const T m = static_cast<T>(parameters.momentum);
    const bool decay = parameters.weight_decay != 0;
    const auto kernel = parameters.nesterov ? (decay ? momentum_kernel<T, true, true> : momentum_kernel<T, true, false>)
                                            : (decay ? momentum_kernel<T, false, true> : momentum_kernel<T, false, false>);
    return launch(kernel, blocks_for(n), kThreads, stream, v, a, g, rate, gate, m, parameters.weight_decay, n);
  });
}

cudaError_t apply_adam(DType dtype, void* variable, void* first_moment, void* second_moment, const void* gradient,
                       const void* learning_rate, const int64_t* step, const bool* gate, const AdamParameters& parameters,
                       int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return visit<float, double>(dtype, [&]<class T>(T) {
    return launch(adam_kernel<T>, blocks_for(n), kThreads, stream, 
        static_cast<T*>(variable), static_cast<T*>(first_moment), static_cast<T*>(second_moment),
        static_cast<const T*>(gradient), static_cast<const T*>(learning_rate), step, gate, parameters, n);
  });
}

cudaError_t assign_add(DType dtype, void* variable, const void* delta, const bool* gate, int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return visit<float, double, int32_t, int64_t>(dtype, [&]<class T>(T) {
    return launch(assign_add_kernel<T>, blocks_for(n), kThreads, stream, static_cast<T*>(variable), static_cast<const T*>(delta),
        gate, n);
  });
}

}  // namespace mirra::ops::cuda
