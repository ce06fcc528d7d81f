// Training on a GPU against the CPU: the benchmark MLP and CNN train 100 steps on gpu:0 and on cpu:0
// from one seed on the same batches; the losses agree within 1e-3 relative at every step (in bf16
// mixed precision, 30 steps within 2e-2: the products' 16-bit results may round to a neighbour). Variables
// trained on the GPU read back into host memory like any other, so what one device trained resumes
// on the other.
#include <doctest/doctest.h>

#include <cmath>
#include <map>
#include <memory>

#include "examples/classifier_training.h"
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

std::vector<double> losses_on(const char* model, graph::DeviceId device, int steps,
                              ops::MixedPrecision mixed_precision = ops::MixedPrecision::off) {
  Training training(model, device, mixed_precision);
  std::vector<double> losses;
  for (int step = 0; step < steps; ++step) losses.push_back(training.step());
  return losses;
}

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

void check_matches_the_cpu(const char* model, ops::MixedPrecision mixed_precision = ops::MixedPrecision::off) {
  CAPTURE(model);
  const bool bf16 = mixed_precision == ops::MixedPrecision::bf16;
  const int steps = bf16 ? 30 : 100;
  const double tolerance = bf16 ? 2e-2 : 1e-3;
  const std::vector<double> cpu = losses_on(model, {graph::DeviceKind::cpu, 0}, steps, mixed_precision);
  const std::vector<double> gpu = losses_on(model, {graph::DeviceKind::gpu, 0}, steps, mixed_precision);
  REQUIRE(gpu.size() == cpu.size());
  for (size_t step = 0; step < cpu.size(); ++step) {
    CAPTURE(step);
    CHECK(std::abs(gpu[step] - cpu[step]) <= tolerance * std::abs(cpu[step]));
  }
}

TEST_CASE("Gpu.training.mlp_matches_the_cpu_for_100_steps") { check_matches_the_cpu("mlp"); }

TEST_CASE("Gpu.training.cnn_matches_the_cpu_for_100_steps") { check_matches_the_cpu("cnn"); }

// bf16 products on the tensor cores (MatMul) and convolutions on widened operands.
TEST_CASE("Gpu.training.cnn_in_bf16_matches_the_cpu") { check_matches_the_cpu("cnn", ops::MixedPrecision::bf16); }

}  // namespace
}  // namespace mirra::runtime
