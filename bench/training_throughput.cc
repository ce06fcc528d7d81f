// Training throughput: steady-state examples/s of training through a strategy, and GPU memory peaks.
#include "bench/training_throughput.h"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <vector>

#include "bench/gpu_floors.h"
#include "examples/classifier_training.h"
#include "ops/build_info.h"
#include "ops/ops.h"
#include "runtime/data/fashion_mnist.h"
#include "runtime/random.h"

namespace mirra::bench {

namespace {

// Fashion-MNIST's training split, or with `synthetic` random images of the model's shape (two batches'
// worth, as tf_cnn_benchmarks feeds), labelled in turn by the classes.
graph::Expected<runtime::data::Dataset> training_data(const TrainingThroughputOptions& options,
                                                      const examples::ClassifierTraining& setup) {
  const runtime::data::BatchingOptions batching{.batch_size = options.batch_size, .seed = 1};
  const runtime::training::TrainingGraph signature = setup.training_graph();
  const runtime::data::ClassifierFeeds feeds{.images = signature.features, .labels = signature.labels};
  const std::vector<int64_t>& image = setup.graph.type(setup.model.images).shape.dims;
  if (!options.synthetic) {
    if (image != std::vector<int64_t>{-1, 28, 28, 1}) {
      return graph::invalid_argument("model '" + options.model + "' reads images of another shape than Fashion-MNIST's: "
                                     "train it on --synthetic data");
    }
    const std::string dir = options.data_dir.empty() ? runtime::data::kFashionMnistDir : options.data_dir;
    return runtime::data::fashion_mnist_dataset(dir, runtime::data::Split::train, batching, feeds);
  }
  const int64_t examples = 2 * options.batch_size, classes = setup.graph.type(setup.model.logits).shape.dim(1);
  const std::vector<int64_t> example_shape(image.begin() + 1, image.end());
  runtime::data::IdxArray pixels{{examples}, {}}, labels{{examples}, {}};
  pixels.dims.insert(pixels.dims.end(), example_shape.begin(), example_shape.end());
  runtime::Random rng(1);
  int64_t size = examples;
  for (const int64_t d : example_shape) size *= d;
  pixels.values.resize(static_cast<size_t>(size));
  for (uint8_t& byte : pixels.values) byte = static_cast<uint8_t>(rng.next() >> 56);
  for (int64_t i = 0; i < examples; ++i) labels.values.push_back(static_cast<uint8_t>(i % std::min<int64_t>(classes, 256)));
  return runtime::data::labelled_images_dataset({std::move(pixels), std::move(labels)}, "synthetic images", example_shape,
                                                batching, feeds);
}

}  // namespace

graph::Expected<nlohmann::json> run_training_throughput(const TrainingThroughputOptions& options) {
  if (options.steps <= 0 || options.warmup_steps <= 0) return graph::invalid_argument("steps and warm-up steps must be positive");
  MIRRA_ASSIGN_OR_RETURN(const ops::MixedPrecision mixed_precision, ops::parse_mixed_precision(options.mixed_precision));
  if (options.optimizer != "momentum" && options.optimizer != "adam") {
    return graph::invalid_argument("optimizer '" + options.optimizer + "' is not momentum or adam");
  }
  const ops::Optimizer optimizer = options.optimizer == "adam" ? ops::Optimizer::adam(0.001) : examples::benchmark_optimizer();
  strategies::StrategyConfig config{.strategy = options.strategy,
                                    .logical_gpus_per_gpu = options.logical_gpus_per_gpu,
                                    .shard_optimizer_state = options.shard_optimizer_state};
  for (const std::string& name : options.devices) {
    MIRRA_ASSIGN_OR_RETURN(const graph::DeviceId device, graph::DeviceId::parse(name));
    config.devices.push_back(device);
  }
  MIRRA_ASSIGN_OR_RETURN(auto strategy, strategies::make_strategy(config));
  MIRRA_ASSIGN_OR_RETURN(auto setup, examples::build_classifier_training(options.model, optimizer, 1, mixed_precision,
                                                                         strategy->config().devices));
  MIRRA_ASSIGN_OR_RETURN(const runtime::data::Dataset train, training_data(options, setup));
  MIRRA_ASSIGN_OR_RETURN(const strategies::TrainingProgram program, strategy->distribute(setup.program()));
  runtime::Session session(program.graph, ops::kernels(),
                           {.threads = options.threads,
                            .allow_tf32 = options.allow_tf32,
                            .logical_gpus_per_gpu = options.logical_gpus_per_gpu,
                            .trace = options.trace,
                            .capture_steps = options.cuda_graph});
  using Clock = std::chrono::steady_clock;
  std::vector<Clock::time_point> step_ends;
  double final_loss = 0;
  runtime::training::Trainer trainer(session, program.signature,
                                     {.epochs = 0,
                                      .max_steps = options.warmup_steps + options.steps,
                                      .on_step = [&](const runtime::training::StepMetrics& m) {
                                        step_ends.push_back(Clock::now());
                                        final_loss = m.loss;
                                        if (options.on_step) options.on_step(session, m);
                                      }});
  MIRRA_RETURN_IF_ERROR(trainer.fit(train).status());
  // The window runs from the end of the last warm-up step to the end of the last step.
  const double seconds =
      std::chrono::duration<double>(step_ends.back() - step_ends[static_cast<size_t>(options.warmup_steps - 1)]).count();
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  nlohmann::json gpu_peaks = nlohmann::json::object();  // device memory held at once, by device
  nlohmann::json device_peaks = nlohmann::json::object();
  bool on_gpu = false;
  for (const auto& device : session.devices().devices()) {
    const runtime::AllocatorStats stats = device->allocator()->stats();
    device_peaks[device->id().to_string()] = stats.peak_bytes_in_use;
    if (device->id().kind != graph::DeviceKind::gpu) continue;
    on_gpu = true;
    gpu_peaks[device->id().to_string()] = {{"peak_bytes_in_use", stats.peak_bytes_in_use},
                                           {"device_allocations", stats.system_allocations}};
  }
  nlohmann::json slot_bytes = ops::optimizer_slot_bytes(session);
  nlohmann::json result{{"framework", "mirra"},
                        {"onednn", ops::onednn_description()},
                        {"model", options.model},
                        {"data", options.synthetic ? "synthetic" : "fashion-mnist"},
                        {"strategy", strategy->describe()},
                        {"threads", options.threads},
                        {"logical_gpus_per_gpu", options.logical_gpus_per_gpu},
                        {"allow_tf32", options.allow_tf32},
                        {"cuda_graph", options.cuda_graph},
                        {"replayed_steps", session.replayed_steps()},
                        {"mixed_precision", options.mixed_precision},
                        {"optimizer", options.optimizer},
                        {"batch", options.batch_size},
                        {"warmup_steps", options.warmup_steps},
                        {"steps", options.steps},
                        {"seconds", seconds},
                        {"examples_per_s", static_cast<double>(options.steps * options.batch_size) / seconds},
                        {"final_loss", final_loss},
                        {"peak_rss_mib", static_cast<double>(usage.ru_maxrss) / 1024.0},
                        {"gpu_memory", gpu_peaks},
                        {"allocator_peak_bytes", device_peaks},
                        {"optimizer_slot_bytes", slot_bytes}};
  // On a GPU, the MLP's step against its matrix products alone through cuBLAS: the floor.
  if (on_gpu && options.model == "mlp" && !options.allow_tf32) {
    MIRRA_ASSIGN_OR_RETURN(const double floor, mlp_gemm_seconds_per_step(options.batch_size, 200));
    result["cublas_floor_ms_per_step"] = floor * 1e3;
    result["ms_per_step"] = seconds / static_cast<double>(options.steps) * 1e3;
    result["floor_over_step"] = floor / (seconds / static_cast<double>(options.steps));
  }
  return result;
}

}  // namespace mirra::bench
