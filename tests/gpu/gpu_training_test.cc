// Training on a GPU against the CPU: the benchmark MLP and CNN train 100 steps on gpu:0 and on cpu:0
// from one seed on the same batches, the GPU taking the CPU's variables every 10 steps; the losses
// agree within 1e-3 relative at every step (in bf16 or fp16 mixed precision, 30 steps within 2e-2:
// the products' 16-bit results may round to a neighbour, and the GPU's convolutions round their sums
// to 16 bits where the CPU keeps them in f32; in fp16 the loss scale moves the same way on both,
// skipped steps included). Variables trained on the GPU read back into host memory like any other, so
// what one device trained resumes on the other.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>

#include "examples/classifier_training.h"
#include "ops/optimizers.h"
#include "ops/registry.h"
#include "runtime/random.h"
#include "runtime/session.h"

namespace mirra::runtime {
namespace {

// One training session of `model` on `device`, fed random batches from a fixed seed.
struct Training {
  examples::ClassifierTraining setup;
  training::TrainingGraph names;
  std::unique_ptr<Session> session;
  Random rng{11};

  Training(const char* model, graph::DeviceId device, ops::MixedPrecision mixed_precision = ops::MixedPrecision::off) {
    auto built = examples::build_classifier_training(model, examples::benchmark_optimizer(), /*seed=*/7, mixed_precision);
    REQUIRE_MESSAGE(built.ok(), built.status().to_string());
    setup = std::move(*built);
    names = setup.training_graph();
    session = std::make_unique<Session>(setup.graph, ops::kernels(), SessionOptions{.threads = 2, .default_device = device});
  }

  // One step on the next random batch; its loss.
  double step() {
    std::vector<float> images(128 * 28 * 28);
    for (float& v : images) v = static_cast<float>(rng.normal());
    std::vector<int64_t> labels(128);
    for (int64_t& label : labels) label = static_cast<int64_t>(rng.uniform() * 10) % 10;
    auto out = session->run({{names.features, Tensor::from<float>({128, 28, 28, 1}, images)},
                             {names.labels, Tensor::from<int64_t>({128}, labels)}},
                            {names.loss}, {names.train});
    REQUIRE_MESSAGE(out.ok(), out.status().to_string());
    return (*out)[0].to_vector<float>()[0];
  }

  // Every variable in host memory, by name: what a checkpoint stores.
  std::map<std::string, Tensor> variables() const {
    std::map<std::string, Tensor> out;
    for (const graph::Node& node : setup.graph.nodes()) {
      if (node.op != "Variable") continue;
      const std::optional<Tensor> value = session->read_variable(node.name);
      REQUIRE(value.has_value());
      CHECK(value->memory_space().host);
      out.emplace(node.name, *value);
    }
    return out;
  }
};

// What a checkpoint holds (every variable, read into host memory) moves between devices: trained on
// one, restored on the other, the next steps' losses agree with those the first device computes.
void check_resumes_across(graph::DeviceId from, graph::DeviceId to) {
  CAPTURE(from.to_string());
  CAPTURE(to.to_string());
  Training first("mlp", from);
  for (int step = 0; step < 5; ++step) first.step();
  Training second("mlp", to);
  second.step();  // creates the variables, which the restore then overwrites
  for (const auto& [name, value] : first.variables()) second.session->assign_variable(name, value);
  second.rng = first.rng;
  // Two steps: the second's loss also depends on the restored momentum slots.
  for (int step = 0; step < 2; ++step) {
    CAPTURE(step);
    const double continued = first.step(), resumed = second.step();
    CHECK(std::abs(resumed - continued) <= 1e-4 * std::abs(continued));
  }
}

TEST_CASE("Gpu.training.resumes_from_the_gpu_on_the_cpu_and_back") {
  check_resumes_across({graph::DeviceKind::gpu, 0}, {graph::DeviceKind::cpu, 0});
  check_resumes_across({graph::DeviceKind::cpu, 0}, {graph::DeviceKind::gpu, 0});
}

// Every kSteadied steps the GPU session takes the CPU session's variables (as a checkpoint moves them),
// so what is compared is the two devices' arithmetic over that many steps. Left alone, training on
// random labels amplifies rounding step by step: the CNN's losses, computed by two correct devices
// whose convolutions sum in other orders (cuDNN's algorithms, oneDNN's), part by more than 1e-3 after
// about twenty steps.
constexpr int kSteadied = 10;

void check_matches_the_cpu(const char* model, ops::MixedPrecision mixed_precision = ops::MixedPrecision::off) {
  CAPTURE(model);
  const bool low_precision = mixed_precision != ops::MixedPrecision::off;
  const int steps = low_precision ? 30 : 100;
  const double tolerance = low_precision ? 2e-2 : 1e-3;
  Training cpu(model, {graph::DeviceKind::cpu, 0}, mixed_precision);
  Training gpu(model, {graph::DeviceKind::gpu, 0}, mixed_precision);
  double largest = 0;
  for (int step = 0; step < steps; ++step) {
    CAPTURE(step);
    if (step > 0 && step % kSteadied == 0) {
      for (const auto& [name, value] : cpu.variables()) gpu.session->assign_variable(name, value);
    }
    const double on_cpu = cpu.step(), on_gpu = gpu.step();
    largest = std::max(largest, std::abs(on_gpu - on_cpu) / std::abs(on_cpu));
    CHECK(std::abs(on_gpu - on_cpu) <= tolerance * std::abs(on_cpu));
  }
  MESSAGE(model << ": the losses differ by at most " << largest << " relative over " << steps << " steps");
  if (mixed_precision == ops::MixedPrecision::fp16) {
    const std::string scale(ops::kLossScaleVariable);
    CHECK(gpu.session->read_variable(scale)->to_vector<float>() == cpu.session->read_variable(scale)->to_vector<float>());
  }
}

TEST_CASE("Gpu.training.mlp_matches_the_cpu_for_100_steps") { check_matches_the_cpu("mlp"); }

TEST_CASE("Gpu.training.cnn_matches_the_cpu_for_100_steps") { check_matches_the_cpu("cnn"); }

// bf16 products and convolutions on the tensor cores (cuBLAS and cuDNN).
TEST_CASE("Gpu.training.cnn_in_bf16_matches_the_cpu") { check_matches_the_cpu("cnn", ops::MixedPrecision::bf16); }

// f16 operands likewise, with dynamic loss scaling: AllFinite, the gated updates and
// UpdateLossScale all on the device.
TEST_CASE("Gpu.training.cnn_in_fp16_matches_the_cpu") { check_matches_the_cpu("cnn", ops::MixedPrecision::fp16); }

}  // namespace
}  // namespace mirra::runtime
