// CUDA kernels of dynamic loss scaling: whether counted non-finite values are none (AllFinite's
// verdict, on the device), and the scale's update after a step (one thread, as the CPU kernel).
#include "ops/cuda/launch.cuh"

namespace mirra::ops::cuda {

namespace {

__global__ void none_counted_kernel(const unsigned long long* counts, bool* finite) { *finite = counts[0] + counts[1] == 0; }

__global__ void update_loss_scale_kernel(float* scale, int64_t* good_steps, const bool* finite, int64_t growth_steps) {
  if (!*finite) {
    *scale = fmaxf(*scale / 2.0f, 1.0f);
    *good_steps = 0;
    return;
  }
  if (++*good_steps < growth_steps) return;
  if (isfinite(*scale * 2.0f)) *scale *= 2.0f;
  *good_steps = 0;
}

}  // namespace

cudaError_t none_counted(const unsigned long long* counts, bool* finite, cudaStream_t stream) {
  return launch(none_counted_kernel, 1, 1, stream, counts, finite);
}

cudaError_t update_loss_scale(float* scale, int64_t* good_steps, const bool* finite, int64_t growth_steps,
                              cudaStream_t stream) {
  return launch(update_loss_scale_kernel, 1, 1, stream, scale, good_steps, finite, growth_steps);
}

}  // namespace mirra::ops::cuda
