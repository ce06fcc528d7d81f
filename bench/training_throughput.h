// The training-throughput benchmark, mirra's side: trains a benchmark model (MLP, CNN, ResNet-20 on
// Fashion-MNIST, or ResNet-18 and ResNet-50 on synthetic ImageNet-shaped images; the benchmark
// settings) through a strategy (one device by default), the Trainer and
// the prefetching Dataset, and measures
// examples/s over a steady-state window after some warm-up steps, the peak memory of each device's
// allocator and the optimizer slots' bytes on each device (for the MLP on a GPU also the floor: its
// matrix products alone through cuBLAS).
// bench/training_vs_pytorch.py runs it next to PyTorch on the CPU (bench/peers/torch_training.py),
// bench/gpu_training_vs_pytorch.py next to PyTorch on a GPU, and they report the ratios.
#pragma once

#include <nlohmann/json.hpp>

#include <functional>
#include <string>
#include <vector>

#include "graph/status.h"
#include "runtime/session.h"
#include "runtime/training/trainer.h"

namespace mirra::bench {

struct TrainingThroughputOptions {
  std::string model = "mlp";  // mlp, cnn, resnet20, resnet18 or resnet50
  std::string strategy = "one_device";  // or mirrored, central_storage
  std::vector<std::string> devices;     // empty: the strategy's default devices
  int logical_gpus_per_gpu = 1;         // each GPU (and cpu_async device) split into this many devices
  bool allow_tf32 = false;              // GPUs may multiply f32 in TF32
  bool cuda_graph = false;              // steps recorded once and replayed (SessionOptions::capture_steps)
  std::string mixed_precision = "off";  // or bf16 (ops/mixed_precision.h)
  std::string optimizer = "momentum";   // the benchmark's momentum SGD, or adam (learning rate 0.001)
  bool shard_optimizer_state = false;   // mirrored: each replica keeps its share of the slots
  int threads = 1;
  int64_t batch_size = 128;
  int64_t warmup_steps = 20;
  int64_t steps = 200;  // timed
  std::string data_dir;  // empty: Debian's dataset-fashion-mnist
  bool synthetic = false;  // random images of the model's shape instead (what resnet18 and resnet50 train on)
  // Record each step's node timeline (SessionOptions::trace) and show every step, warm-up included,
  // with its session to `on_step` (the runner's --profile), once the step is timed.
  bool trace = false;
  std::function<void(const runtime::Session&, const runtime::training::StepMetrics&)> on_step;
};

graph::Expected<nlohmann::json> run_training_throughput(const TrainingThroughputOptions& options);

}  // namespace mirra::bench
