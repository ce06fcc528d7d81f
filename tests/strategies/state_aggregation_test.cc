// State a training step writes from each replica's own values, combined as its variable's
// aggregation says (ops::VariableAggregation), trains as on one device: a count of examples seen
// (sum), a moving mean of the features (mean, on shares of equal size, where the mean of the
// replicas' means is the batch's), and the batch's first example (only_first_replica), under
// Mirrored and CentralStorage over 1 to 3 replicas and Mirrored with sharded optimizer state, every
// replica's copy equal once the signature's synchronize target ran. The moving mean is combined at
// every write (on_write) or, with on_read, only by that target, the replicas' copies differing
// before it. Such a write to a variable without an aggregation is refused naming both, and so is an
// aggregation or synchronization no one knows, and on_read with another aggregation than mean.
#include <doctest/doctest.h>

#include "tests/strategies/strategy_test_util.h"

namespace mirra::strategies::test {
namespace {

using graph::DType;
using graph::ValueRef;
using ops::VariableAggregation;

constexpr int64_t kFeatures = 4, kClasses = 3;

struct StateModel {
  VariableAggregation seen = VariableAggregation::sum;
  VariableAggregation mean = VariableAggregation::mean;
  VariableAggregation first = VariableAggregation::only_first_replica;
  ops::VariableSynchronization mean_synchronization = ops::VariableSynchronization::on_write;
};

graph::Expected<TrainingProgram> build(const StateModel& m) {
  TrainingProgram program;
  graph::Builder b(program.graph, ops::registry(), /*seed=*/3);
  const ValueRef images = ops::placeholder(b, "images", DType::f64, {-1, kFeatures});
  const ValueRef w = ops::variable(b, "w", {kFeatures, kClasses}, ops::Initializer::glorot_uniform(), DType::f64);
  const ops::ClassifierObjective objective = ops::classifier_objective(b, ops::matmul(b, images, w));
  std::vector<graph::NodeId> updates;
  {
    auto scope = b.scope("stats");
    const ValueRef seen = ops::variable(b, "examples_seen", {}, ops::Initializer::zeros(), DType::f64, false, m.seen);
    updates.push_back(ops::assign_add(b, seen, ops::cast(b, ops::dim_size(b, images, 0), DType::f64)));
    const ValueRef mean = ops::variable(b, "feature_mean", {kFeatures}, ops::Initializer::zeros(), DType::f64, false, m.mean,
                                       m.mean_synchronization);
    const ValueRef half = ops::scalar_of(b, 0.5, mean);
    const ValueRef batch_mean = ops::reduce_mean(b, images, {0});
    updates.push_back(ops::assign(b, mean, ops::add(b, ops::mul(b, half, mean), ops::mul(b, half, batch_mean))));
    const ValueRef first = ops::variable(b, "first_example", {kFeatures}, ops::Initializer::zeros(), DType::f64, false, m.first);
    updates.push_back(ops::assign(b, first, ops::reshape(b, ops::slice(b, images, {0, 0}, {1, kFeatures}), {kFeatures})));
  }
  MIRRA_ASSIGN_OR_RETURN(ops::TrainOp train,
                         ops::minimize(b, objective.loss, ops::Optimizer::momentum_sgd(0.1, 0.9), {.state_updates = updates}));
  program.signature = {.loss = objective.loss, .correct = objective.correct, .train = train.train,
                       .learning_rate = train.learning_rate};
  program.variables_and_gradients = train.variables_and_gradients;
  program.loss_gradient = train.loss_gradient;
  program.step_state = train.step_state;
  return program;
}

std::vector<Batch> batches_of(std::initializer_list<int64_t> sizes) {
  runtime::Random rng(17);
  std::vector<Batch> batches;
  for (int64_t size : sizes) {
    std::vector<double> x(static_cast<size_t>(size * kFeatures));
    std::vector<int64_t> l(static_cast<size_t>(size));
    for (double& v : x) v = 2 * rng.uniform() - 1;
    for (int64_t& v : l) v = static_cast<int64_t>(rng.below(kClasses));
    batches.push_back({runtime::Tensor::from<double>(runtime::TensorShape({size, kFeatures}), std::span<const double>(x)),
                       runtime::Tensor::from<int64_t>(runtime::TensorShape({size}), std::span<const int64_t>(l))});
  }
  return batches;
}

struct Trained {
  std::vector<double> losses;
  std::map<std::string, std::vector<double>> variables;  // replica 0's, by replica-free name
  bool replicas_differed = false;  // whether the replicas' copies differed before synchronize ran
};

Trained train(const TrainingProgram& program, const std::string& strategy, int replicas, const std::vector<Batch>& batches,
              bool sharded = false) {
  auto made = make_strategy(
      {.strategy = strategy, .devices = devices_of(graph::DeviceKind::cpu, replicas), .shard_optimizer_state = sharded});
  REQUIRE(made.ok());
  auto distributed = (*made)->distribute(program);
  REQUIRE_MESSAGE(distributed.ok(), distributed.status().to_string());
  runtime::Session session(distributed->graph, ops::kernels(), {.threads = 2});
  Trained out;
  for (const Batch& batch : batches) {
    auto step = session.run(feeds(*distributed, batch), {distributed->signature.loss}, {distributed->signature.train});
    REQUIRE_MESSAGE(step.ok(), step.status().to_string());
    out.losses.push_back((*step)[0].values<double>()[0]);
  }
  out.replicas_differed = replicas_differ(float_variables(session), [](std::string_view plain) { return !is_slot(plain); });
  REQUIRE(runtime::training::synchronize_on_read(session, distributed->signature).ok());
  const std::map<std::string, std::vector<double>> variables = float_variables(session);
  for (const auto& [name, value] : variables) {
    int replica = -1;
    const std::string plain(replica_free_name(name, &replica));
    if (replica <= 0) {
      out.variables[plain] = value;
    } else if (!is_slot(plain)) {  // sharded slots hold different shares
      const std::string variable = name;  // a structured binding cannot be captured (C++20)
      CAPTURE(variable);
      CHECK(value == variables.at("replica_0/" + plain));  // every replica's copy alike
    }
  }
  return out;
}

TEST_CASE("Strategies.state_written_from_each_replica_trains_as_one_device") {
  for (const ops::VariableSynchronization synchronization :
       {ops::VariableSynchronization::on_write, ops::VariableSynchronization::on_read}) {
    const std::string mean_synchronization(ops::synchronization_name(synchronization));
    CAPTURE(mean_synchronization);
    auto program = build({.mean_synchronization = synchronization});
    REQUIRE_MESSAGE(program.ok(), program.status().to_string());
    const std::vector<Batch> batches = batches_of({6, 12, 6});
    const Trained reference = train(*program, "one_device", 1, batches);
    CHECK(reference.variables.at("stats/examples_seen") == std::vector<double>{24});
    CHECK(reference.variables.at("stats/first_example") ==
          std::vector<double>(batches[2].images.values<double>().begin(), batches[2].images.values<double>().begin() + kFeatures));
    for (const char* strategy : {"mirrored", "central_storage"}) {
      for (int replicas = 1; replicas <= 3; ++replicas) {
        const std::string strategy_name = strategy;
        CAPTURE(strategy_name);
        CAPTURE(replicas);
        const Trained got = train(*program, strategy, replicas, batches);
        for (size_t step = 0; step < batches.size(); ++step) {
          CHECK(got.losses[step] == doctest::Approx(reference.losses[step]).epsilon(1e-12));
        }
        for (const auto& [name, value] : reference.variables) check_within(name, got.variables.at(name), value, 1e-12);
        // Only Mirrored's copies of an on_read variable go their own ways between reads.
        const bool mirrored_on_read = strategy_name == "mirrored" && replicas > 1 &&
                                      synchronization == ops::VariableSynchronization::on_read;
        CHECK(got.replicas_differed == mirrored_on_read);
      }
    }
    const Trained sharded = train(*program, "mirrored", 3, batches, /*sharded=*/true);
    for (const auto& [name, value] : reference.variables) {
      if (!is_slot(name)) check_within(name, sharded.variables.at(name), value, 1e-12);
    }
  }
}

TEST_CASE("Strategies.refuse_state_written_per_replica_without_an_aggregation") {
  auto program = build({.mean = VariableAggregation::none});
  REQUIRE_MESSAGE(program.ok(), program.status().to_string());
  CHECK(train(*program, "one_device", 1, batches_of({4})).variables.count("stats/feature_mean") == 1);
  for (const char* strategy : {"mirrored", "central_storage"}) {
    auto made = make_strategy({.strategy = strategy, .devices = devices_of(graph::DeviceKind::cpu, 2)});
    REQUIRE(made.ok());
    auto distributed = (*made)->distribute(*program);
    REQUIRE_FALSE(distributed.ok());
    CHECK(distributed.status().message().find("'stats/Assign' (Assign) writes 'stats/feature_mean' from values each "
                                              "replica computes on its own; give the variable an aggregation") !=
          std::string::npos);
  }
}

TEST_CASE("Ops.variable_aggregations_are_named") {
  for (VariableAggregation a : {VariableAggregation::none, VariableAggregation::sum, VariableAggregation::mean,
                                VariableAggregation::only_first_replica}) {
    CHECK(ops::aggregation_from_name(ops::aggregation_name(a)) == a);
  }
  graph::Graph g;
  graph::Builder b(g, ops::registry());
  b.add_value({.op = "Variable",
               .attrs = {{"dtype", DType::f32}, {"shape", graph::Shape{2}}, {"aggregation", std::string("average")}},
               .name = "v"});
  REQUIRE_FALSE(b.status().ok());
  CHECK(b.status().message().find("unknown aggregation 'average' (none, sum, mean or only_first_replica)") !=
        std::string::npos);
}

TEST_CASE("Ops.variable_synchronizations_are_named_and_on_read_needs_the_mean") {
  for (ops::VariableSynchronization s : {ops::VariableSynchronization::on_write, ops::VariableSynchronization::on_read}) {
    CHECK(ops::synchronization_from_name(ops::synchronization_name(s)) == s);
  }
  const auto refusal = [](graph::AttrMap attrs) {
    graph::Graph g;
    graph::Builder b(g, ops::registry());
    attrs.set("dtype", DType::f32);
    attrs.set("shape", graph::Shape{2});
    b.add_value({.op = "Variable", .attrs = std::move(attrs), .name = "v"});
    return b.status().message();
  };
  CHECK(refusal({{"synchronization", std::string("lazily")}}).find("unknown synchronization 'lazily' (on_write or on_read)") !=
        std::string::npos);
  CHECK(refusal({{"aggregation", std::string("sum")}, {"synchronization", std::string("on_read")}})
            .find("synchronization on_read needs the aggregation mean, not sum") != std::string::npos);
  CHECK(refusal({{"synchronization", std::string("on_read")}}).find("needs the aggregation mean, not none") != std::string::npos);
  CHECK(refusal({{"aggregation", std::string("mean")}, {"synchronization", std::string("on_read")}}).empty());
}

}  // namespace
}  // namespace mirra::strategies::test
