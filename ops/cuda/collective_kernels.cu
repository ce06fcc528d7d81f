// CUDA kernels of the collectives among replicas that share one GPU: the sum over replicas' buffers,
// in passes of at most kPointersPerPass buffers (their pointers travel as kernel arguments), then
// one pass that writes the result into every replica's output. bf16 buffers are summed in f32 and
// rounded once per pass (once, up to 32 replicas), as the CPU collective sums them.
#include "ops/cuda/launch.cuh"
#include "ops/cuda/sixteen_bit.cuh"

namespace mirra::ops::cuda {

namespace {

constexpr int kPointersPerPass = 32;

template <class T>
struct Sources {
  const T* at[kPointersPerPass];
};
template <class T>
struct Targets {
  T* at[kPointersPerPass];
};

// acc[i] (+)= sources 0..count-1 at i, in order; `first`: the first pass, whose first source starts
// the sum. The last pass divides by `divisor` (1 for a sum), as the CPU divides.
template <class T>
__global__ void accumulate_kernel(Sources<T> sources, int count, bool first, Accumulator<T> divisor, T* acc, int64_t n) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) {
    Accumulator<T> sum = accumulated(sources.at[0][i]);
    if (!first) sum = accumulated(acc[i]) + sum;
    for (int c = 1; c < count; ++c) sum += accumulated(sources.at[c][i]);
    acc[i] = stored<T>(divisor == Accumulator<T>(1) ? sum : sum / divisor);
  }
}

template <class T>
__global__ void copy_to_replicas_kernel(Targets<T> targets, int count, const T* value, int64_t n) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) {
    const T v = value[i];
    for (int c = 0; c < count; ++c) targets.at[c][i] = v;
  }
}

template <class T>
cudaError_t sum_over_replicas_of(const void* const* inputs, void* const* outputs, int replicas, bool mean, int64_t n,
                                 cudaStream_t stream) {
  T* acc = static_cast<T*>(outputs[0]);
  for (int begin = 0; begin < replicas; begin += kPointersPerPass) {
    const int count = std::min(kPointersPerPass, replicas - begin);
    Sources<T> sources{};
    for (int c = 0; c < count; ++c) sources.at[c] = static_cast<const T*>(inputs[begin + c]);
    const bool last = begin + count == replicas;
    const Accumulator<T> divisor = last && mean ? static_cast<Accumulator<T>>(replicas) : Accumulator<T>(1);
    const cudaError_t error =
        launch(accumulate_kernel<T>, blocks_for(n), kThreads, stream, sources, count, begin == 0, divisor, acc, n);
    if (error != cudaSuccess) return error;
  }
  for (int begin = 1; begin < replicas; begin += kPointersPerPass) {
    const int count = std::min(kPointersPerPass, replicas - begin);
    Targets<T> targets{};
    for (int c = 0; c < count; ++c) targets.at[c] = static_cast<T*>(outputs[begin + c]);
    const cudaError_t error = launch(copy_to_replicas_kernel<T>, blocks_for(n), kThreads, stream, targets, count, acc, n);
    if (error != cudaSuccess) return error;
  }
  return cudaSuccess;
}

}  // namespace

cudaError_t sum_over_replicas(DType dtype, const void* const* inputs, void* const* outputs, int replicas, bool mean,
                              int64_t n, cudaStream_t stream) {
  if (n == 0 || replicas == 0) return cudaSuccess;
  return visit<float, double, graph::bfloat16>(dtype, [&](auto t) {
    return sum_over_replicas_of<decltype(t)>(inputs, outputs, replicas, mean, n, stream);
  });
}

}  // namespace mirra::ops::cuda
