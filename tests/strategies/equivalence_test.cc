// The strategies' invariant: N replicas on a global batch B give the variables one device gives on B,
// for N in 1..4, B in {128, 61, 2} (so some replicas get no examples), SGD, Momentum and Adam, the MLP
// and a small CNN, after 20 steps; Mirrored's replicas stay bitwise identical after every step; and
// the reported loss and correct count match one device's. The same over asynchronous devices
// (cpu_async:0..2: streams of their own, memory of their own, copies inserted by placement), against
// the reference on cpu:0, and one device on cpu_async:0 alone (Mirrored's single replica reduces
// on its own device).
#include <doctest/doctest.h>

#include <cmath>

#include "tests/strategies/strategy_test_util.h"

namespace mirra::strategies::test {
namespace {

constexpr int kSteps = 20;

double scalar(const runtime::Tensor& t) {
  return t.dtype() == graph::DType::f64 ? t.values<double>()[0] : static_cast<double>(t.values<float>()[0]);
}

void check_equivalence(const std::string& model, const ops::Optimizer& optimizer, int64_t batch_size,
                       graph::DeviceKind kind, int max_replicas) {
  const TrainingProgram program = build_program(model, optimizer);
  const std::vector<Batch> batches = random_batches(model, batch_size, kSteps, 17);
  runtime::Session reference(program.graph, ops::kernels(), {.threads = 2});
  std::vector<double> reference_loss, reference_correct;
  for (const Batch& batch : batches) {
    auto out = reference.run(feeds(program, batch), {program.signature.loss, program.signature.correct},
                             {program.signature.train});
    REQUIRE(out.ok());
    reference_loss.push_back(scalar((*out)[0]));
    reference_correct.push_back(scalar((*out)[1]));
  }
  const auto want = float_variables(reference);

  struct Run {
    std::string strategy;
    int replicas;
  };
  std::vector<Run> runs;
  if (kind != graph::DeviceKind::cpu) runs.push_back({"one_device", 1});
  for (int replicas = 1; replicas <= max_replicas; ++replicas) {
    runs.push_back({"mirrored", replicas});
    runs.push_back({"central_storage", replicas});
  }
  for (const Run& run : runs) {
    const std::string& strategy_name = run.strategy;
    const int replicas = run.replicas;
    CAPTURE(strategy_name);
    CAPTURE(replicas);
    auto strategy = make_strategy({.strategy = strategy_name, .devices = devices_of(kind, replicas)});
    REQUIRE(strategy.ok());
    auto distributed = (*strategy)->distribute(program);
    REQUIRE_MESSAGE(distributed.ok(), distributed.status().to_string());
    // A single replica's buckets stay on its device; several replicas meet on the host.
    for (const graph::Node& node : distributed->graph.nodes()) {
      if (node.op == "AllReduce") CHECK(node.device == (replicas == 1 ? devices_of(kind, 1)[0] : graph::DeviceId{graph::DeviceKind::cpu, 0}));
    }
    runtime::Session session(distributed->graph, ops::kernels(), {.threads = 2});
    const bool mirrored = strategy_name == "mirrored";
    for (size_t step = 0; step < batches.size(); ++step) {
      auto out = session.run(feeds(*distributed, batches[step]),
                             {distributed->signature.loss, distributed->signature.correct},
                             {distributed->signature.train});
      REQUIRE_MESSAGE(out.ok(), out.status().to_string());
      CHECK(scalar((*out)[0]) == doctest::Approx(reference_loss[step]).epsilon(1e-5));
      CHECK(scalar((*out)[1]) == reference_correct[step]);
      if (!mirrored) continue;
      // Every replica's copy of every variable (and slot) is bitwise equal to replica 0's.
      const auto values = float_variables(session);
      for (const auto& [name, value] : want) {
        if (name.starts_with("optimizer/")) continue;  // step state exists once
        const std::vector<double>& first = values.at("replica_0/" + name);
        for (int r = 1; r < replicas; ++r) {
          if (values.at("replica_" + std::to_string(r) + "/" + name) != first) {
            FAIL("replica " << r << " of " << name << " differs from replica 0 after step " << step);
          }
        }
      }
    }
    const auto got = float_variables(session);
    for (const auto& [name, value] : want) {
      if (name.starts_with("optimizer/")) continue;
      check_close(name, got.at(mirrored ? "replica_0/" + name : name), value);
    }
  }
}

void check_every_case(graph::DeviceKind kind, int max_replicas) {
  const std::vector<ops::Optimizer> optimizers = {ops::Optimizer::sgd(0.05), ops::Optimizer::momentum_sgd(0.05, 0.9),
                                                  ops::Optimizer::adam(0.001)};
  for (const std::string model : {"mlp", "small_cnn"}) {
    for (const ops::Optimizer& optimizer : optimizers) {
      for (int64_t batch : {128, 61, 2}) {
        CAPTURE(model);
        CAPTURE(optimizer.kind);
        CAPTURE(batch);
        check_equivalence(model, optimizer, batch, kind, max_replicas);
      }
    }
  }
}

TEST_CASE("Strategies.equivalent_to_one_device") { check_every_case(graph::DeviceKind::cpu, 4); }

TEST_CASE("Strategies.equivalent_to_one_device.on_cpu_async_devices") { check_every_case(graph::DeviceKind::cpu_async, 3); }

}  // namespace
}  // namespace mirra::strategies::test
