// The strategies' invariant: N replicas on a global batch B give the variables one device gives on B,
// for N in 1..4, B in {128, 61, 2} (so some replicas get no examples), SGD, Momentum and Adam, the MLP
// and a small CNN, after 20 steps; Mirrored's replicas stay bitwise identical after every step; and
// the reported loss and correct count match one device's. The same over asynchronous devices
// (cpu_async:0..2: streams of their own, memory of their own, copies inserted by placement), against
// the reference on cpu:0, and one device on cpu_async:0 alone (Mirrored's single replica reduces
// on its own device; several sum among themselves, as GPUs do with NCCL). And over logical devices
// (2 or 3 cpu_async devices sharing one memory space, the model of logical GPUs on one GPU): buckets
// summed on the shared device, or per device and then among the devices
// (strategies/all_reduce_plan.h).
#include <doctest/doctest.h>

#include <cmath>
#include <map>
#include <set>

#include "tests/strategies/strategy_test_util.h"

namespace mirra::strategies::test {
namespace {

constexpr int kSteps = 20;

double scalar(const runtime::Tensor& t) {
  return t.dtype() == graph::DType::f64 ? t.values<double>()[0] : static_cast<double>(t.values<float>()[0]);
}

// Where a Mirrored graph's all-reduce ranks must run under `plan`, and whether they share that
// device's memory with their peers: on the host where buckets meet there; on each replica's device
// where replicas share one device's memory (and within each device, hierarchical); on each device's
// leader where the devices sum among themselves.
std::set<std::pair<graph::DeviceId, bool>> collective_devices(const AllReducePlan& plan, const std::vector<graph::DeviceId>& devices) {
  std::set<std::pair<graph::DeviceId, bool>> where;
  switch (plan.path) {
    case AllReducePath::single: where = {{devices.front(), true}}; break;
    case AllReducePath::host: where = {{{graph::DeviceKind::cpu, 0}, false}}; break;
    case AllReducePath::on_device:
      for (int replica : plan.groups.front()) where.insert({devices[static_cast<size_t>(replica)], true});
      break;
    case AllReducePath::peer:
    case AllReducePath::hierarchical:
      for (const std::vector<int>& group : plan.groups) {
        for (size_t i = 0; i < group.size() && group.size() > 1; ++i) where.insert({devices[static_cast<size_t>(group[i])], true});
        where.insert({devices[static_cast<size_t>(group.front())], false});
      }
      break;
  }
  return where;
}

void check_equivalence(const std::string& model, const ops::Optimizer& optimizer, int64_t batch_size,
                       graph::DeviceKind kind, int max_replicas, int logical_per_physical = 1) {
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
  if (kind != graph::DeviceKind::cpu && logical_per_physical == 1) runs.push_back({"one_device", 1});
  for (int replicas = logical_per_physical == 1 ? 1 : 2; replicas <= max_replicas; ++replicas) {
    runs.push_back({"mirrored", replicas});
    if (logical_per_physical == 1) runs.push_back({"central_storage", replicas});
  }
  for (const Run& run : runs) {
    const std::string& strategy_name = run.strategy;
    const int replicas = run.replicas;
    CAPTURE(strategy_name);
    CAPTURE(replicas);
    const std::vector<graph::DeviceId> devices = devices_of(kind, replicas);
    auto strategy =
        make_strategy({.strategy = strategy_name, .devices = devices, .logical_gpus_per_gpu = logical_per_physical});
    REQUIRE(strategy.ok());
    auto distributed = (*strategy)->distribute(program);
    REQUIRE_MESSAGE(distributed.ok(), distributed.status().to_string());
    // A single replica's buckets stay on its device; replicas sharing a device's memory are summed
    // there; devices sum among themselves; the rest meet on the host.
    std::set<std::pair<graph::DeviceId, bool>> ran_on;
    for (const graph::Node& node : distributed->graph.nodes()) {
      if (node.op == "AllReduce") ran_on.insert({*node.device, graph::checked_attr<bool>(node, "shared_memory")});
    }
    if (strategy_name == "mirrored") CHECK(ran_on == collective_devices((*strategy)->all_reduce_plan(), devices));
    runtime::Session session(distributed->graph, ops::kernels(), {.threads = 2, .logical_gpus_per_gpu = logical_per_physical});
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

void check_every_case(graph::DeviceKind kind, int max_replicas, int logical_per_physical = 1) {
  const std::vector<ops::Optimizer> optimizers = {ops::Optimizer::sgd(0.05), ops::Optimizer::momentum_sgd(0.05, 0.9),
                                                  ops::Optimizer::adam(0.001)};
  for (const std::string model : {"mlp", "small_cnn"}) {
    for (const ops::Optimizer& optimizer : optimizers) {
      for (int64_t batch : {128, 61, 2}) {
        CAPTURE(model);
        CAPTURE(optimizer.kind);
        CAPTURE(batch);
        check_equivalence(model, optimizer, batch, kind, max_replicas, logical_per_physical);
      }
    }
  }
}

// The fusion passes the runner's programs take replace nodes; the gradient a strategy aggregates must
// still be the one each update applies (the padding folded into a convolution and its filter's gradient).
TEST_CASE("Strategies.equivalent_to_one_device.with_the_padding_folded_into_the_convolution") {
  const TrainingProgram program = build_program("padded_cnn", ops::Optimizer::momentum_sgd(0.05, 0.9));
  int explicit_padding = 0;
  for (const graph::Node& node : program.graph.nodes()) {
    const std::string* padding = node.attrs.get<std::string>("padding");
    explicit_padding += padding != nullptr && *padding == "EXPLICIT";
  }
  CHECK(explicit_padding == 3);  // the convolution and both its gradients
  check_equivalence("padded_cnn", ops::Optimizer::momentum_sgd(0.05, 0.9), 61, graph::DeviceKind::cpu, 3);
}

TEST_CASE("Strategies.equivalent_to_one_device") { check_every_case(graph::DeviceKind::cpu, 4); }

TEST_CASE("Strategies.equivalent_to_one_device.on_cpu_async_devices") { check_every_case(graph::DeviceKind::cpu_async, 3); }

// Two logical devices per physical one: 2 replicas are summed on one device, 3 and 4 per device and
// then on the host (one group of one replica with 3).
TEST_CASE("Strategies.equivalent_to_one_device.on_logical_devices") {
  check_every_case(graph::DeviceKind::cpu_async, 4, 2);
}

// Three logical devices on one: every bucket is summed on it.
TEST_CASE("Strategies.equivalent_to_one_device.on_three_logical_devices_of_one") {
  check_every_case(graph::DeviceKind::cpu_async, 3, 3);
}

}  // namespace
}  // namespace mirra::strategies::test
