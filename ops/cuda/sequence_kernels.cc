// GPU kernels of the sequence ops, host side: Dropout, GatherV2, UnsortedSegmentSum and the row-wise
// updates of looked-up rows (SparseApply*), which complete on the host once the device has counted the
// indices out of range (an error naming the first such count, as the CPU's names the index:
// TensorFlow's CPU behaviour, where its GPU kernels return zeros), and LayerNorm with its gradient.
// Shapes and errors as on the CPU (ops/kernel_shapes.h).
#include <functional>

#include "ops/cuda/gpu_kernel.h"
#include "ops/kernel_shapes.h"

namespace mirra::ops::cuda {

namespace {

using graph::DeviceKind;
using graph::DType;

// Runs `work` on the compute stream with a zeroed device counter, copies the counter back to pinned
// host memory, and completes `done` once the device has run it: ok when the count is 0, else with
// the error `refusal(count)`. `keep` holds device buffers the work reads until then.
void run_counting(KernelContext& ctx, runtime::KernelDone done, const std::function<Status(unsigned long long*)>& work,
                  std::function<Status(int64_t)> refusal, std::vector<Tensor> keep = {}) {
  const runtime::cuda::GpuDevice& gpu = gpu_of(ctx);
  Tensor count = Tensor::empty(gpu.allocator(), DType::i64, TensorShape{1});
  Tensor on_host = Tensor::empty(gpu.host_memory_allocator(), DType::i64, TensorShape{1});
  auto* device_count = static_cast<unsigned long long*>(count.mutable_raw_data());
  const runtime::MemorySpace space = gpu.memory_space();
  Status launch;
  gpu.gpu_stream().enqueue([&] {
    const runtime::ScopedMemoryAccess host_too(space, /*host_too=*/true);
    launch = runtime::cuda::check(cudaMemsetAsync(device_count, 0, count.byte_size(), gpu.stream()), "cudaMemsetAsync");
    if (launch.ok()) launch = work(device_count);
    if (launch.ok()) {
      launch = runtime::cuda::check(
          cudaMemcpyAsync(on_host.mutable_raw_data(), device_count, count.byte_size(), cudaMemcpyDeviceToHost, gpu.stream()),
          "cudaMemcpyAsync");
    }
  });
  if (!launch.ok()) return done(launch);
  keep.push_back(std::move(count));
  gpu.gpu_stream().when_device_done([keep = std::move(keep), on_host = std::move(on_host), done = std::move(done),
                                     refusal = std::move(refusal)](Status status) {
    if (!status.ok()) return done(std::move(status));
    const int64_t found = on_host.data<int64_t>()[0];
    done(found == 0 ? Status() : refusal(found));
  });
}

Status dropout_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& keys = ctx.input(1);
  MIRRA_ASSIGN_OR_RETURN(const int64_t per_example, dropout_elements_per_example(x, keys));
  Tensor& y = ctx.allocate_output(0, x.dtype(), x.shape());
  Tensor& mask = ctx.allocate_output(1, x.dtype(), x.shape());
  return launched(dropout(x.dtype(), x.raw_data(), keys.data<int64_t>(), y.mutable_raw_data(), mask.mutable_raw_data(),
                          x.num_elements(), per_example,
                          static_cast<uint64_t>(ctx.attr<int64_t>("seed")), ctx.attr<double>("rate"), ctx.attr<bool>("training"),
                          stream_of(ctx)),
                  "dropout");
}

void gather_kernel(KernelContext& ctx, runtime::KernelDone done) {
  const Tensor& params = ctx.input(0);
  const Tensor& indices = ctx.input(1);
  const GatherGeometry g = gather_geometry(params.shape(), indices.shape(), ctx.attr<int64_t>("axis"));
  Tensor& y = ctx.allocate_output(0, params.dtype(), g.output);
  const GatherRows rows{.outer = g.outer, .axis_size = g.axis_size, .inner = g.inner, .indices = g.indices};
  run_counting(
      ctx, std::move(done),
      [&](unsigned long long* bad) {
        return launched(gather(graph::dtype_size(params.dtype()), indices.dtype(), params.raw_data(), indices.raw_data(),
                               y.mutable_raw_data(), rows, bad, stream_of(ctx)),
                        "gather");
      },
      [size = g.axis_size](int64_t found) {
        return graph::invalid_argument(std::to_string(found) + " indices are not in [0, " + std::to_string(size) + ")");
      });
}

// The device scratch of sorting `rows` ids of `id_dtype` for `segments` segments, its buffers added
// to `buffers`.
SegmentScratch segment_scratch(const KernelContext& ctx, DType id_dtype, int64_t rows, int64_t segments,
                               std::vector<Tensor>& buffers) {
  const auto& allocator = gpu_of(ctx).allocator();
  const size_t sort_bytes = segment_sum_scratch_bytes(id_dtype, rows);
  buffers = {Tensor::empty(allocator, id_dtype, TensorShape{rows}), Tensor::empty(allocator, DType::i64, TensorShape{rows}),
             Tensor::empty(allocator, DType::i64, TensorShape{rows}), Tensor::empty(allocator, DType::i64, TensorShape{segments + 1}),
             Tensor::empty(allocator, DType::u8, TensorShape{static_cast<int64_t>(sort_bytes)})};
  return {.sorted_ids = buffers[0].mutable_raw_data(),
          .rows = buffers[1].mutable_data<int64_t>(),
          .order = buffers[2].mutable_data<int64_t>(),
          .starts = buffers[3].mutable_data<int64_t>(),
          .sort = buffers[4].mutable_raw_data(),
          .sort_bytes = sort_bytes};
}

void unsorted_segment_sum_kernel(KernelContext& ctx, runtime::KernelDone done) {
  const Tensor& data = ctx.input(0);
  const Tensor& ids = ctx.input(1);
  const int64_t segments = ctx.attr<int64_t>("num_segments");
  auto geometry = segment_geometry(data.shape(), ids.shape(), segments);
  if (!geometry.ok()) return done(geometry.status());
  const SegmentGeometry& g = *geometry;
  Tensor& y = ctx.allocate_output(0, data.dtype(), g.output);
  std::vector<Tensor> scratch;
  const SegmentScratch space = segment_scratch(ctx, ids.dtype(), g.rows, segments, scratch);
  run_counting(
      ctx, std::move(done),
      [&](unsigned long long* bad) {
        return launched(unsorted_segment_sum(data.dtype(), ids.dtype(), data.raw_data(), ids.raw_data(), y.mutable_raw_data(),
                                             g.rows, g.inner, segments, space, bad, stream_of(ctx)),
                        "unsorted_segment_sum");
      },
      [segments](int64_t found) {
        return graph::invalid_argument(std::to_string(found) + " segment_ids are not in [0, " + std::to_string(segments) + ")");
      },
      std::move(scratch));
}

// SparseApplyGradientDescent, SparseApplyMomentum and SparseApplyAdam: `slots` inputs after the
// variable, then rows, indices, the learning rate (and Adam's step) and the optional gate.
void sparse_apply_kernel(KernelContext& ctx, runtime::KernelDone done, size_t slots, size_t gate, SparseUpdate update) {
  if (const Status valid = check_sparse_update_operands(ctx, slots); !valid.ok()) return done(valid);
  Tensor& variable = ctx.input_for_update(0);
  const Tensor& rows = ctx.input(slots + 1);
  const Tensor& indices = ctx.input(slots + 2);
  update.variable = variable.mutable_raw_data();
  if (slots > 0) update.first_slot = ctx.input_for_update(1).mutable_raw_data();
  if (slots > 1) update.second_slot = ctx.input_for_update(2).mutable_raw_data();
  update.learning_rate = ctx.input(slots + 3).raw_data();
  if (update.rule == SparseRule::adam) update.step = ctx.input(slots + 4).data<int64_t>();
  update.gate = ctx.num_inputs() > gate ? ctx.input(gate).data<bool>() : nullptr;
  const int64_t limit = variable.shape().dim(0);
  const SparseRows named{.rows = rows.raw_data(),
                         .indices = indices.raw_data(),
                         .index_dtype = indices.dtype(),
                         .count = indices.num_elements(),
                         .width = limit > 0 ? variable.num_elements() / limit : 1,
                         .limit = limit};
  std::vector<Tensor> scratch;
  const SegmentScratch space = segment_scratch(ctx, indices.dtype(), named.count, 0, scratch);
  run_counting(
      ctx, std::move(done),
      [&](unsigned long long* bad) {
        return launched(sparse_apply(variable.dtype(), update, named, space, bad, stream_of(ctx)), "sparse_apply");
      },
      [limit](int64_t found) {
        return graph::invalid_argument(std::to_string(found) + " indices are not in [0, " + std::to_string(limit) + ")");
      },
      std::move(scratch));
}

void sparse_apply_gradient_descent_kernel(KernelContext& ctx, runtime::KernelDone done) {
  sparse_apply_kernel(ctx, std::move(done), 0, kSparseGradientDescentGate, {.rule = SparseRule::gradient_descent});
}

void sparse_apply_momentum_kernel(KernelContext& ctx, runtime::KernelDone done) {
  sparse_apply_kernel(ctx, std::move(done), 1, kSparseMomentumGate,
                      {.rule = ctx.attr<bool>("use_nesterov") ? SparseRule::nesterov_momentum : SparseRule::momentum,
                       .momentum = ctx.attr<double>("momentum")});
}

void sparse_apply_adam_kernel(KernelContext& ctx, runtime::KernelDone done) {
  sparse_apply_kernel(ctx, std::move(done), 2, kSparseAdamGate,
                      {.rule = SparseRule::adam,
                       .beta1 = ctx.attr<double>("beta1"),
                       .beta2 = ctx.attr<double>("beta2"),
                       .epsilon = ctx.attr<double>("epsilon")});
}

Status layer_norm_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  MIRRA_ASSIGN_OR_RETURN(const LayerNormGeometry g, layer_norm_geometry(ctx, /*gradient=*/false));
  Tensor& y = ctx.allocate_output(0, x.dtype(), x.shape());
  Tensor& mean = ctx.allocate_output(1, x.dtype(), g.row_shape);
  Tensor& rstd = ctx.allocate_output(2, x.dtype(), g.row_shape);
  return launched(layer_norm(x.dtype(), x.raw_data(), ctx.input(1).raw_data(), ctx.input(2).raw_data(), y.mutable_raw_data(),
                             mean.mutable_raw_data(), rstd.mutable_raw_data(), g.rows, g.columns, ctx.attr<double>("epsilon"),
                             stream_of(ctx)),
                  "layer_norm");
}

Status layer_norm_grad_kernel(KernelContext& ctx) {
  const Tensor& dy = ctx.input(0);
  const Tensor& x = ctx.input(1);
  MIRRA_ASSIGN_OR_RETURN(const LayerNormGeometry g, layer_norm_geometry(ctx, /*gradient=*/true));
  Tensor& dx = ctx.allocate_output(0, x.dtype(), x.shape());
  Tensor& dscale = ctx.allocate_output(1, x.dtype(), TensorShape{g.columns});
  Tensor& doffset = ctx.allocate_output(2, x.dtype(), TensorShape{g.columns});
  return launched(layer_norm_grad(x.dtype(), dy.raw_data(), x.raw_data(), ctx.input(2).raw_data(), ctx.input(3).raw_data(),
                                  ctx.input(4).raw_data(), dx.mutable_raw_data(), dscale.mutable_raw_data(),
                                  doffset.mutable_raw_data(), g.rows, g.columns, stream_of(ctx)),
                  "layer_norm_grad");
}

}  // namespace

void register_gpu_sequence_kernels(runtime::KernelRegistry& kernels) {
  const uint32_t floats = runtime::dtype_mask({DType::f32, DType::f64});
  const char* host_check = "completes on the host, after the device counted the indices out of range";
  kernels.add("GatherV2", DeviceKind::gpu, {.async_fn = gather_kernel, .not_capturable = host_check});
  kernels.add("UnsortedSegmentSum", DeviceKind::gpu, {.async_fn = unsorted_segment_sum_kernel, .not_capturable = host_check});
  kernels.add("SparseApplyGradientDescent", DeviceKind::gpu,
              {.async_fn = sparse_apply_gradient_descent_kernel, .not_capturable = host_check});
  kernels.add("SparseApplyMomentum", DeviceKind::gpu, {.async_fn = sparse_apply_momentum_kernel, .not_capturable = host_check});
  kernels.add("SparseApplyAdam", DeviceKind::gpu, {.async_fn = sparse_apply_adam_kernel, .not_capturable = host_check});
  kernels.add("Dropout", DeviceKind::gpu, {.fn = dropout_kernel, .dtypes = floats});
  kernels.add("LayerNorm", DeviceKind::gpu, {.fn = layer_norm_kernel, .dtypes = floats});
  kernels.add("LayerNormGrad", DeviceKind::gpu, {.fn = layer_norm_grad_kernel, .dtypes = floats});
}

}  // namespace mirra::ops::cuda
