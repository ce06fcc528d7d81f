// The rewrites as text, pinned: a small model (one dense layer, SGD) under Mirrored with 1, 2 and 3
// replicas and under CentralStorage with 2, with tiny buckets so the bucket chain shows; and with
// momentum under Mirrored over 3 with sharded optimizer state (uneven shares of 6 and 2 elements). Run with
// MIRRA_UPDATE_GOLDEN=1 to rewrite the files after an intended change, then review the diff. A program
// that does not name the seed of its gradients is refused, and so is one with a node its schema refuses.
// Each pass of replicate (strategies/replicate_passes.h) is pinned too: the lines of the graph text it
// adds or rewires, under Mirrored over 2 devices with bf16 compression and tiny buckets,
// CentralStorage over 2, Mirrored over 3 with sharded optimizer state, Mirrored over 2
// accumulating gradients, Mirrored and CentralStorage over 2 writing a moving mean of the features,
// and Mirrored over 2 with synchronised batch normalisation (tests/strategies/golden/passes/).
#include <doctest/doctest.h>

#include <set>
#include <sstream>

#include "graph/dot.h"
#include "graph/print.h"
#include "ops/ops.h"
#include "strategies/bucket_hooks.h"
#include "strategies/replicate.h"
#include "strategies/strategy.h"
#include "tests/golden_file.h"

namespace mirra::strategies {
namespace {

// With `moving_mean`, the train step also writes a moving mean of the features (aggregation mean).
TrainingProgram small_program(const ops::Optimizer& optimizer = ops::Optimizer::sgd(0.1), bool moving_mean = false) {
  TrainingProgram program;
  graph::Builder b(program.graph, ops::registry(), 1);
  auto x = ops::placeholder(b, "images", graph::DType::f32, {-1, 3});
  auto w = ops::variable(b, "dense/w", {3, 2}, ops::Initializer::glorot_uniform());
  auto bias = ops::variable(b, "dense/b", {2});
  const ops::ClassifierObjective objective = ops::classifier_objective(b, ops::bias_add(b, ops::matmul(b, x, w), bias));
  ops::MinimizeOptions options;
  if (moving_mean) {
    auto scope = b.scope("stats");
    auto mean = ops::variable(b, "moving_mean", {3}, ops::Initializer::zeros(), graph::DType::f32, false,
                              ops::VariableAggregation::mean);
    options.state_updates.push_back(ops::assign(b, mean, ops::reduce_mean(b, x, {0})));
  }
  auto train = ops::minimize(b, objective.loss, optimizer, options);
  REQUIRE(train.ok());
  program.signature = {.loss = objective.loss, .correct = objective.correct, .train = train->train,
                       .learning_rate = train->learning_rate};
  program.variables_and_gradients = train->variables_and_gradients;
  program.loss_gradient = train->loss_gradient;
  program.step_state = train->step_state;
  return program;
}

StrategyConfig config(const char* strategy, int replicas) {
  StrategyConfig c{.strategy = strategy};
  for (int r = 0; r < replicas; ++r) c.devices.push_back({graph::DeviceKind::cpu, r});
  c.all_reduce.first_bucket_mb = 8.0 / (1 << 20);  // the 2-float bias alone
  c.all_reduce.bucket_mb = 16.0 / (1 << 20);
  return c;
}

TEST_CASE("Strategies.rewrites_match_golden_text") {
  const TrainingProgram program = small_program();
  for (const std::pair<const char*, int>& rewrite : {std::pair{"mirrored", 1}, std::pair{"mirrored", 2},
                                                      std::pair{"mirrored", 3}, std::pair{"central_storage", 2}}) {
    const char* strategy = rewrite.first;
    const int replicas = rewrite.second;
    CAPTURE(replicas);
    auto made = make_strategy(config(strategy, replicas));
    REQUIRE(made.ok());
    auto distributed = (*made)->distribute(program);
    REQUIRE_MESSAGE(distributed.ok(), distributed.status().to_string());
    test::check_golden("tests/strategies/golden/" + std::string(strategy) + "_" + std::to_string(replicas) + ".txt",
                       graph::to_text(distributed->graph));
    const std::string dot = graph::to_dot(distributed->graph);
    CHECK(dot.find("SplitBatch") != std::string::npos);
    CHECK(dot.find(std::string(strategy) == "mirrored" ? "AllReduce" : "label=\"reduce\"") != std::string::npos);
  }
}

TEST_CASE("Strategies.sharded_rewrite_matches_golden_text") {
  StrategyConfig c = config("mirrored", 3);
  c.shard_optimizer_state = true;
  auto made = make_strategy(c);
  REQUIRE(made.ok());
  auto distributed = (*made)->distribute(small_program(ops::Optimizer::momentum_sgd(0.1, 0.9)));
  REQUIRE_MESSAGE(distributed.ok(), distributed.status().to_string());
  test::check_golden("tests/strategies/golden/mirrored_3_sharded.txt", graph::to_text(distributed->graph));
}

// Images [?, 1, 2, 2] through batch normalisation (channels first) into a dense layer of 2: the
// program the synchronised passes are pinned on.
TrainingProgram batch_norm_program() {
  TrainingProgram program;
  graph::Builder b(program.graph, ops::registry(), 1);
  auto x = ops::placeholder(b, "images", graph::DType::f32, {-1, 2, 1, 2});
  ops::BatchNormalization bn;
  {
    auto scope = b.scope("bn");
    bn = ops::batch_normalization(b, x, {.data_format = "NCHW"});
  }
  auto w = ops::variable(b, "dense/w", {4, 2}, ops::Initializer::glorot_uniform());
  const ops::ClassifierObjective objective = ops::classifier_objective(b, ops::matmul(b, ops::reshape(b, bn.y, {-1, 4}), w));
  auto train = ops::minimize(b, objective.loss, ops::Optimizer::sgd(0.1), {.state_updates = bn.state_updates});
  REQUIRE(train.ok());
  program.signature = {.loss = objective.loss, .correct = objective.correct, .train = train->train,
                       .learning_rate = train->learning_rate};
  program.variables_and_gradients = train->variables_and_gradients;
  program.loss_gradient = train->loss_gradient;
  program.step_state = train->step_state;
  return program;
}

ReplicationPlan plan_over(int replicas, bool mirror_state, bool sharded) {
  ReplicationPlan plan{.host = {graph::DeviceKind::cpu, 0}, .mirror_state = mirror_state, .shard_optimizer_state = sharded};
  for (int r = 0; r < replicas; ++r) plan.devices.push_back({graph::DeviceKind::cpu, r});
  plan.buckets = {.first_bucket_bytes = 8, .bucket_bytes = 16};  // the 2-float bias alone first
  plan.reduction = plan_all_reduce(plan.devices, {.central_variables = !mirror_state, .sharded_state = sharded});
  return plan;
}

// The lines of `after` that `before` does not have: the nodes a pass added, and those it rewired.
std::string changes(const std::string& before, const std::string& after) {
  std::set<std::string> had;
  std::istringstream old_lines(before), new_lines(after);
  for (std::string line; std::getline(old_lines, line);) had.insert(line);
  std::string out;
  for (std::string line; std::getline(new_lines, line);) {
    if (had.count(line) == 0) out += line + "\n";
  }
  return out;
}

// Runs replicate and pins each pass's changes as tests/strategies/golden/passes/<name>/<pass>.txt.
void check_passes(const std::string& name, const TrainingProgram& program, const ReplicationPlan& plan) {
  CAPTURE(name);
  std::string before;
  std::vector<std::string> passes;
  auto replicated = replicate(program, plan, [&](std::string_view pass, const graph::Graph& g) {
    const std::string text = graph::to_text(g);
    test::check_golden("tests/strategies/golden/passes/" + name + "/" + std::string(pass) + ".txt", changes(before, text));
    passes.emplace_back(pass);
    before = text;
  });
  REQUIRE_MESSAGE(replicated.ok(), replicated.status().to_string());
  std::vector<std::string> every = {"clone_per_replica", "split_batch_inputs", "weight_gradient_seeds",
                                    "aggregate_state", plan.shard_optimizer_state ? "shard_optimizer_updates" : "aggregate_gradients",
                                    "finish_signature", "report_metrics"};
  if (plan.sync_batch_norm) every.insert(every.begin() + 2, "synchronise_batch_norm");
  CHECK(passes == every);
}

TEST_CASE("Replicate.each_pass_matches_golden_text") {
  ReplicationPlan compressed = plan_over(2, true, false);
  compressed.bucket_hook = bf16_compression();
  check_passes("mirrored_2_bf16", small_program(ops::Optimizer::sgd(0.1)), compressed);
  check_passes("central_storage_2", small_program(ops::Optimizer::sgd(0.1)), plan_over(2, false, false));
  check_passes("mirrored_3_sharded", small_program(ops::Optimizer::momentum_sgd(0.1, 0.9)), plan_over(3, true, true));
  TrainingProgram accumulating = small_program(ops::Optimizer::sgd(0.1));
  accumulating.accumulate_gradients = true;
  check_passes("mirrored_2_accumulated", accumulating, plan_over(2, true, false));
  check_passes("mirrored_2_moving_mean", small_program(ops::Optimizer::sgd(0.1), true), plan_over(2, true, false));
  check_passes("central_storage_2_moving_mean", small_program(ops::Optimizer::sgd(0.1), true), plan_over(2, false, false));
  ReplicationPlan synchronised = plan_over(2, true, false);
  synchronised.sync_batch_norm = true;
  check_passes("mirrored_2_sync_batch_norm", batch_norm_program(), synchronised);
}

TEST_CASE("Strategies.replicating_needs_the_seed_of_the_gradients") {
  TrainingProgram program = small_program();
  program.loss_gradient = {};
  auto made = make_strategy(config("mirrored", 2));
  REQUIRE(made.ok());
  auto distributed = (*made)->distribute(program);
  REQUIRE_FALSE(distributed.ok());
  CHECK(distributed.status().message() ==
        "replicate: the program does not name the seed of its gradients (loss_gradient)");
}

// distribute checks the nodes its result runs against their schemas (every test that distributes a
// program relies on it); a node no schema allows is an internal error naming it.
TEST_CASE("Strategies.distribute_refuses_a_graph_with_a_node_its_schema_refuses") {
  TrainingProgram program = small_program();
  program.graph.mutable_node(*program.graph.find("MatMul")).outputs[0].shape = graph::Shape{-1, 5};
  for (const char* strategy : {"one_device", "mirrored"}) {
    CAPTURE(strategy);
    auto made = make_strategy(config(strategy, std::string(strategy) == "mirrored" ? 2 : 1));
    REQUIRE(made.ok());
    auto distributed = (*made)->distribute(program);
    REQUIRE_FALSE(distributed.ok());
    CHECK(distributed.status().code() == graph::StatusCode::internal);
    CHECK(distributed.status().message().find("the rewrite left an invalid node: node '") != std::string::npos);
    CHECK(distributed.status().message().find("MatMul' (MatMul): output 0 is declared f32[?,5]") != std::string::npos);
  }
}

}  // namespace
}  // namespace mirra::strategies
