// Row-wise updates of an embedding table through every strategy (ops/sparse_updates.h): gradient
// descent by rows trains bit for bit as the dense update; lazy momentum and Adam train as the dense
// update would if it then put back every row a step did not look up (and its slots), on one device and
// under CentralStorage; lazy updates refuse Mirrored (whose all-reduce sums the table's gradient whole)
// and weight decay, naming the table.
#include <doctest/doctest.h>

#include <set>

#include "strategies/strategy.h"
#include "tests/strategies/strategy_test_util.h"

namespace mirra::strategies::test {
namespace {

constexpr int kSteps = 4;
constexpr const char* kTable = "embedding/table";

graph::Expected<TrainingProgram> distributed(const TrainingProgram& program, const std::string& strategy, int replicas) {
  MIRRA_ASSIGN_OR_RETURN(auto made, make_strategy({.strategy = strategy, .devices = devices_of(graph::DeviceKind::cpu, replicas)}));
  return made->distribute(program);
}

// The ops of the nodes that update the table.
std::multiset<std::string> table_updates(const graph::Graph& g) {
  std::multiset<std::string> ops;
  for (const graph::Node& node : g.nodes()) {
    if (node.op.find("Apply") != std::string::npos && g.node(node.inputs[0].node).name.ends_with(kTable)) ops.insert(node.op);
  }
  return ops;
}

std::map<std::string, std::vector<double>> train(const TrainingProgram& program, const std::vector<Batch>& batches) {
  runtime::Session session(program.graph, ops::kernels(), {.threads = 2});
  for (const Batch& batch : batches) REQUIRE(session.run(feeds(program, batch), {}, {program.signature.train}).ok());
  return float_variables(session);
}

// The dense update's training with every row no id of a step named (and its slots) put back after
// that step: what a lazy update computes.
std::map<std::string, std::vector<double>> train_dense_keeping_rows_not_looked_up(const TrainingProgram& program,
                                                                                   const std::vector<Batch>& batches) {
  runtime::Session session(program.graph, ops::kernels(), {.threads = 2});
  constexpr int64_t kWidth = 16;
  for (const Batch& batch : batches) {
    std::set<int64_t> used;
    for (const int64_t id : batch.images.values<int64_t>()) used.insert(id);
    std::map<std::string, runtime::Tensor> before;
    for (const auto& [name, values] : float_variables(session)) {
      if (name.starts_with(kTable)) before.emplace(name, runtime::host_copy(*session.read_variable(name)));
    }
    REQUIRE(session.run(feeds(program, batch), {}, {program.signature.train}).ok());
    for (auto& entry : before) {
      runtime::Tensor& kept = entry.second;
      const runtime::Tensor after = *session.read_variable(entry.first);
      double* rows = kept.mutable_data<double>();
      for (const int64_t id : used) {
        for (int64_t c = 0; c < kWidth; ++c) rows[id * kWidth + c] = after.data<double>()[id * kWidth + c];
      }
      session.assign_variable(entry.first, kept);
    }
  }
  return float_variables(session);
}

TEST_CASE("SparseUpdates.gradient_descent_by_rows_trains_bit_for_bit_as_the_dense_update") {
  const TrainingProgram program = build_program("embedding", ops::Optimizer::sgd(0.5));
  const std::vector<Batch> batches = random_batches("embedding", 16, kSteps, 3);
  auto one_device = distributed(program, "one_device", 1);
  REQUIRE_MESSAGE(one_device.ok(), one_device.status().to_string());
  CHECK(table_updates(one_device->graph) == std::multiset<std::string>{"SparseApplyGradientDescent"});
  CHECK(table_updates(program.graph) == std::multiset<std::string>{"ApplyGradientDescent"});
  const auto want = train(program, batches);
  const auto got = train(*one_device, batches);
  REQUIRE(got.size() == want.size());
  for (const auto& entry : want) CHECK_MESSAGE(got.at(entry.first) == entry.second, entry.first << " differs");
}

TEST_CASE("SparseUpdates.lazy_momentum_and_adam_update_only_the_rows_looked_up") {
  const std::vector<Batch> batches = random_batches("embedding", 16, kSteps, 5);
  ops::Optimizer momentum = ops::Optimizer::momentum_sgd(0.5, 0.9), adam = ops::Optimizer::adam(0.01);
  for (ops::Optimizer optimizer : {momentum, adam}) {
    CAPTURE(optimizer.kind);
    const TrainingProgram dense = build_program("embedding", optimizer);
    optimizer.lazy = true;
    const TrainingProgram lazy = build_program("embedding", optimizer);
    const auto want = train_dense_keeping_rows_not_looked_up(dense, batches);
    for (const std::string strategy : {"one_device", "central_storage"}) {
      CAPTURE(strategy);
      auto result = distributed(lazy, strategy, strategy == "one_device" ? 1 : 2);
      REQUIRE_MESSAGE(result.ok(), result.status().to_string());
      CHECK(table_updates(result->graph) ==
            std::multiset<std::string>{optimizer.kind == "adam" ? "SparseApplyAdam" : "SparseApplyMomentum"});
      const auto got = train(*result, batches);
      for (const auto& [name, values] : want) check_close(name, got.at(name), values);
    }
    // The rows no batch looked up kept their starting values, unlike the dense update's momentum.
    const auto dense_trained = train(dense, batches);
    CHECK(dense_trained.at(kTable) != want.at(kTable));
  }
}

TEST_CASE("SparseUpdates.lazy_updates_refuse_mirrored_and_weight_decay_naming_the_table") {
  ops::Optimizer adam = ops::Optimizer::adam(0.01);
  adam.lazy = true;
  auto mirrored = distributed(build_program("embedding", adam), "mirrored", 2);
  REQUIRE_FALSE(mirrored.ok());
  CHECK_MESSAGE(mirrored.status().message().find("lazy update of 'replica_0/embedding/table'") != std::string::npos,
                mirrored.status().to_string());
  CHECK_MESSAGE(mirrored.status().message().find("all-reduces") != std::string::npos, mirrored.status().to_string());
  adam.weight_decay = 0.1;
  auto decayed = distributed(build_program("embedding", adam), "one_device", 1);
  REQUIRE_FALSE(decayed.ok());
  CHECK_MESSAGE(decayed.status().message().find("lazy update of 'embedding/table' decays every row") != std::string::npos,
                decayed.status().to_string());
  adam.exclude_from_weight_decay = {"table"};
  CHECK(distributed(build_program("embedding", adam), "one_device", 1).ok());
}

}  // namespace
}  // namespace mirra::strategies::test
