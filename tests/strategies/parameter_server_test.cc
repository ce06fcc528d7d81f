// The parameter-server strategy, synchronous: 1 or 2 servers and 2 or 3 workers, each worker feeding
// its own share of global batches of 128 and 61, cut by task and run by one session per task over an
// in-process communicator (or gRPC between localhost ports), give the variables (and optimizer slots) one device gives on the whole
// batches after 20 steps, with SGD and Adam, the MLP and a small CNN; the servers hold every variable
// and the workers none; the global batch's loss is computed on server 0 and reported by every worker; the servers share the bytes
// evenly; variables above min_shard_bytes are cut into parts on different servers (evenly or not)
// and still train as one device; plans without a server, or with a worker outside a worker task, are refused naming it.
// With a staleness bound k (over gRPC, whose sends do not wait for their receives): the variables
// step t reads are those before step t - k, exactly (one device fed the gradients of those, computed
// on the global batch by a second session), and each worker reports its own share's loss. An
// embedding model's lookups run on the table's server, which updates the rows the workers send (also
// lazily with Adam, as one device): no worker moves the table, no task makes a table-sized gradient,
// and the workers move under a hundredth of the dense pulls' and pushes' bytes.
// Asynchronous: a copy of the program per worker, and on each server a loop per worker over that copy's transfers.
#include <doctest/doctest.h>

#include <future>
#include <set>

#include "runtime/collectives/grpc_communicator.h"
#include "runtime/collectives/in_process_communicator.h"
#include "strategies/parameter_server.h"
#include "strategies/pruning.h"
#include "strategies/variable_partitioning.h"
#include "tests/local_addresses.h"
#include "tests/strategies/strategy_test_util.h"

namespace mirra::strategies::test {
namespace {

using mirra::test::free_local_addresses;

constexpr int kSteps = 20;

struct Case {
  std::string model;
  ops::Optimizer optimizer;
  int servers;
  int workers;
  int64_t batch;
  bool over_grpc = false;  // else over one in-process communicator
  int64_t min_shard_bytes = 0;
  int staleness = 0;
  bool lookups_on_servers = true;
};

// Each partitioned variable's parts ("<name>/part_<i>") joined in part order: rows along axis 0, so
// the flat values follow one another.
std::map<std::string, std::vector<double>> joined_parts(const std::map<std::string, std::vector<double>>& values) {
  std::map<std::string, std::map<int, const std::vector<double>*>> parts;
  std::map<std::string, std::vector<double>> joined;
  for (const auto& [name, value] : values) {
    int part = -1;
    const std::string whole(partition_free_name(name, &part));
    if (part < 0) {
      joined[name] = value;
    } else {
      parts[whole][part] = &value;
    }
  }
  for (const auto& whole : parts) {  // no structured bindings: CHECK_MESSAGE's lambda takes them
    std::vector<double>& all = joined[whole.first];
    int expected = 0;
    for (const auto& part : whole.second) {
      CHECK_MESSAGE(part.first == expected++, "'" << whole.first << "' lacks a part before " << part.first);
      all.insert(all.end(), part.second->begin(), part.second->end());
    }
  }
  return joined;
}

double scalar(const runtime::Tensor& t) {
  return t.dtype() == graph::DType::f64 ? t.values<double>()[0] : static_cast<double>(t.values<float>()[0]);
}

// Each worker's batches, shares of global batches of c.batch: the first (batch mod workers) one example larger.
std::vector<std::vector<Batch>> worker_shares(const Case& c) {
  std::vector<std::vector<Batch>> shares;
  for (int w = 0; w < c.workers; ++w) {
    const int64_t share = c.batch / c.workers + (w < c.batch % c.workers ? 1 : 0);
    shares.push_back(random_batches(c.model, share, kSteps, 31 + static_cast<uint64_t>(w)));
  }
  return shares;
}

// The case as a failure names it.
std::string describe(const Case& c) {
  return c.model + " " + c.optimizer.kind + ", " + std::to_string(c.servers) + " servers, " + std::to_string(c.workers) +
         " workers, batch " + std::to_string(c.batch) + (c.over_grpc ? ", over gRPC" : "") + ", min_shard_bytes " +
         std::to_string(c.min_shard_bytes) + ", staleness " + std::to_string(c.staleness) +
         (c.lookups_on_servers ? "" : ", lookups on the workers");
}

// The tensor bytes the workers received and sent over gRPC in all (none in process).
struct WorkerBytes {
  int64_t received = 0, sent = 0;
};

// One session per task of `tasks`, in task order, exchanging values over gRPC between localhost
// ports, or without c.over_grpc over one in-process communicator; `workers_grpc` gets the workers'
// gRPC communicators (whose bytes a test counts).
std::vector<std::unique_ptr<runtime::Session>> task_sessions(const Case& c, const std::map<int, TaskProgram>& tasks,
                                                             const std::string& fingerprint,
                                                             std::vector<std::shared_ptr<runtime::GrpcCommunicator>>* workers_grpc = nullptr) {
  std::shared_ptr<runtime::Communicator> in_process = std::make_shared<runtime::InProcessCommunicator>();
  const std::vector<std::string> addresses = c.over_grpc ? free_local_addresses(c.servers + c.workers) : std::vector<std::string>();
  std::vector<std::unique_ptr<runtime::Session>> sessions;
  for (const auto& [task, part] : tasks) {
    std::shared_ptr<runtime::Communicator> transfers = in_process;
    if (c.over_grpc) {
      auto grpc = runtime::GrpcCommunicator::start({.addresses = addresses, .task = task, .token = "t", .fingerprint = fingerprint});
      REQUIRE_MESSAGE(grpc.ok(), grpc.status().to_string());
      transfers = *grpc;
      if (task >= c.servers && workers_grpc != nullptr) workers_grpc->push_back(*grpc);
    }
    sessions.push_back(std::make_unique<runtime::Session>(part.graph, ops::kernels(),
                                                          runtime::SessionOptions{.threads = 1, .communicators = {transfers}, .task = task}));
  }
  return sessions;
}

// The servers (the first `servers` sessions) hold `want`'s variables, the parts of cut ones joined.
void check_servers_hold(const std::vector<std::unique_ptr<runtime::Session>>& sessions, int servers,
                        const std::map<std::string, std::vector<double>>& want) {
  std::map<std::string, std::vector<double>> got;
  for (int s = 0; s < servers; ++s) got.merge(float_variables(*sessions[static_cast<size_t>(s)]));
  got = joined_parts(got);
  for (const auto& [name, value] : want) {
    const auto found = got.find(name);
    if (found == got.end()) FAIL("no server holds '" << name << "'");
    check_close(name, found->second, value);
  }
}

// The cluster's program as the strategy's distribute leaves it: placed, the embedding table's
// updates by rows (ops/sparse_updates.h), pruned.
graph::Expected<TrainingProgram> cluster_program(const TrainingProgram& program, const ParameterServerPlan& plan) {
  MIRRA_ASSIGN_OR_RETURN(TrainingProgram cluster, place_on_parameter_servers(program, plan));
  MIRRA_RETURN_IF_ERROR(ops::update_looked_up_rows(cluster.graph, *cluster.ops));
  prune(cluster);
  return cluster;
}

// The program as one device trains it (lazy updates by rows).
TrainingProgram on_one_device(const TrainingProgram& program) {
  auto strategy = make_strategy({.strategy = "one_device", .devices = devices_of(graph::DeviceKind::cpu, 1)});
  REQUIRE_MESSAGE(strategy.ok(), strategy.status().to_string());
  auto distributed = (*strategy)->distribute(program);
  REQUIRE_MESSAGE(distributed.ok(), distributed.status().to_string());
  return *distributed;
}

WorkerBytes check_trains_as_one_device(const Case& c) {
  INFO(describe(c));
  const TrainingProgram program = build_program(c.model, c.optimizer);
  const std::vector<std::vector<Batch>> shares = worker_shares(c);
  const TrainingProgram one_device = on_one_device(program);
  runtime::Session reference(one_device.graph, ops::kernels(), {.threads = 2});
  std::vector<double> reference_loss;
  for (int step = 0; step < kSteps; ++step) {
    std::vector<Batch> parts;
    for (const std::vector<Batch>& worker : shares) parts.push_back(worker[static_cast<size_t>(step)]);
    auto out = reference.run(feeds(one_device, join(parts)), {one_device.signature.loss}, {one_device.signature.train});
    REQUIRE(out.ok());
    reference_loss.push_back(scalar((*out)[0]));
  }

  ParameterServerPlan plan{.servers = c.servers, .min_shard_bytes = c.min_shard_bytes, .lookups_on_servers = c.lookups_on_servers};
  for (int w = 0; w < c.workers; ++w) plan.workers.push_back({graph::DeviceKind::cpu, 0, c.servers + w});
  auto cluster = cluster_program(program, plan);
  REQUIRE_MESSAGE(cluster.ok(), cluster.status().to_string());
  auto tasks = parameter_server_tasks(*cluster);
  REQUIRE_MESSAGE(tasks.ok(), tasks.status().to_string());
  REQUIRE(tasks->size() == static_cast<size_t>(c.servers + c.workers));
  for (int w = 0; w < c.workers; ++w) {
    for (const graph::Node& node : tasks->at(c.servers + w).graph.nodes()) {
      if (node.op == "Variable") FAIL("worker " << w << " holds variable '" << node.name << "'");
    }
  }
  std::map<std::string, std::set<int>> servers_of_parts;  // by whole variable
  for (int s = 0; s < c.servers; ++s) {
    int variables = 0;
    for (const graph::Node& node : tasks->at(s).graph.nodes()) {
      variables += node.op == "Variable";
      int part = -1;
      const std::string_view whole = partition_free_name(node.name, &part);
      if (node.op == "Variable" && node.attrs.contains("partition_of")) servers_of_parts[std::string(whole)].insert(s);
    }
    CHECK_MESSAGE(variables > 0, "server " << s << " holds no variable");
  }
  if (c.min_shard_bytes > 0) {
    // The first layer's kernel and its slots are cut, one part on each server.
    CHECK(servers_of_parts.size() >= 1);
    for (const auto& entry : servers_of_parts) CHECK_MESSAGE(entry.second.size() == static_cast<size_t>(c.servers), entry.first);
  } else {
    CHECK(servers_of_parts.empty());
  }
  std::vector<std::shared_ptr<runtime::GrpcCommunicator>> workers_grpc;
  const std::vector<std::unique_ptr<runtime::Session>> sessions = task_sessions(c, *tasks, program_fingerprint(cluster->graph), &workers_grpc);
  for (int step = 0; step < kSteps; ++step) {
    std::vector<std::future<graph::Expected<std::vector<runtime::Tensor>>>> runs;
    for (int task = 0; task < c.servers + c.workers; ++task) {
      runtime::Feeds fed;
      std::vector<graph::ValueRef> fetches;
      if (task >= c.servers) fed = feeds(program, shares[static_cast<size_t>(task - c.servers)][static_cast<size_t>(step)]);
      const graph::ValueRef loss = tasks->at(task).signature.loss;  // server 0's, and each worker's copy
      if (loss.valid()) fetches.push_back(loss);
      runs.push_back(std::async(std::launch::async, [&, task, fed, fetches] {
        return sessions[static_cast<size_t>(task)]->run(fed, fetches, std::vector<graph::NodeId>{tasks->at(task).signature.train});
      }));
    }
    for (int task = 0; task < c.servers + c.workers; ++task) {
      auto out = runs[static_cast<size_t>(task)].get();
      REQUIRE_MESSAGE(out.ok(), "task " << task << " step " << step << ": " << out.status().to_string());
      if (task == 0 || task >= c.servers) {
        REQUIRE(out->size() == 1);
        CHECK(scalar((*out)[0]) == doctest::Approx(reference_loss[static_cast<size_t>(step)]).epsilon(1e-5));
      }
    }
  }
  check_servers_hold(sessions, c.servers, float_variables(reference));
  WorkerBytes bytes;
  for (const auto& grpc : workers_grpc) {
    bytes.received += grpc->bytes_received();
    bytes.sent += grpc->bytes_sent();
  }
  return bytes;
}

TEST_CASE("ParameterServer.sync.trains_as_one_device_on_the_global_batch") {
  const ops::Optimizer sgd{.kind = "sgd", .learning_rate = 0.1};
  const ops::Optimizer adam{.kind = "adam", .learning_rate = 0.01};
  const ops::Optimizer momentum{.kind = "momentum", .learning_rate = 0.05, .momentum = 0.9};
  for (const Case& c : {Case{"mlp", sgd, 1, 2, 128}, Case{"mlp", adam, 2, 2, 61}, Case{"mlp", adam, 1, 3, 61},
                        Case{"small_cnn", sgd, 2, 2, 128}, Case{"small_cnn", adam, 2, 3, 61},
                        Case{"mlp", adam, 2, 2, 61, true}, Case{"mlp", adam, 2, 2, 61, false, 64 << 10},
                        Case{"small_cnn", momentum, 2, 3, 128, false, 64}, Case{"mlp", sgd, 2, 2, 128, true, 64 << 10}}) {
    check_trains_as_one_device(c);
  }
}

TEST_CASE("ParameterServer.assign_servers_puts_the_largest_first_on_the_least_loaded") {
  // 40 on 0; 30 on 1; 20 on 1 (30 < 40); 10 on 0 (40 < 50): 50 bytes each.
  CHECK(assign_servers({10, 40, 30, 20}, 2) == std::vector<int>{0, 0, 1, 1});
  CHECK(assign_servers({5, 5, 5}, 1) == std::vector<int>{0, 0, 0});
  CHECK(assign_servers({7}, 3) == std::vector<int>{0});
  // Parts of one variable go onto different servers: w's 30 would join its 40 on the less loaded
  // server 1 (40 < 50) were they not parts of one variable.
  CHECK(assign_servers({40, 50, 30}, 2) == std::vector<int>{1, 0, 1});
  CHECK(assign_servers({40, 50, 30}, 2, {"w", "", "w"}) == std::vector<int>{1, 0, 0});
  CHECK(assign_servers({40, 41, 30}, 2, {"w", "w", "w"}) == std::vector<int>{1, 0, 1});  // more parts than servers
}

TEST_CASE("ParameterServer.partition_rows_cuts_as_tensorflows_min_size_partitioner") {
  CHECK(partition_rows(784, 784 * 256 * 4, {.min_shard_bytes = 64 << 10, .max_shards = 2}) == std::vector<int64_t>{392, 392});
  CHECK(partition_rows(5, 100, {.min_shard_bytes = 30, .max_shards = 4}) == std::vector<int64_t>{2, 2, 1});  // 100 / 30 = 3 parts
  CHECK(partition_rows(5, 100, {.min_shard_bytes = 60, .max_shards = 4}) == std::vector<int64_t>{5});        // under twice the least
  CHECK(partition_rows(2, 1 << 20, {.min_shard_bytes = 1, .max_shards = 8}) == std::vector<int64_t>{1, 1});  // a row each at most
  CHECK(partition_rows(9, 1 << 20, {.min_shard_bytes = 0, .max_shards = 8}) == std::vector<int64_t>{9});     // 0: never cut
}

TEST_CASE("ParameterServer.a_variable_whose_gradient_is_clipped_by_the_global_norm_is_not_cut") {
  ops::Optimizer clipped{.kind = "sgd", .learning_rate = 0.1};
  clipped.clip_global_norm = 1.0;
  const TrainingProgram program = build_program("mlp", clipped);
  auto cluster = place_on_parameter_servers(
      program, {.servers = 2, .workers = {{graph::DeviceKind::cpu, 0, 2}}, .min_shard_bytes = 64 << 10});
  REQUIRE_FALSE(cluster.ok());
  CHECK(cluster.status().message().find("parameter_server cannot cut '") != std::string::npos);
  CHECK(cluster.status().message().find("raise min_shard_bytes to keep it whole") != std::string::npos);
  // Kept whole, it trains.
  CHECK(place_on_parameter_servers(program, {.servers = 2, .workers = {{graph::DeviceKind::cpu, 0, 2}}}).ok());
}

TEST_CASE("ParameterServer.refuses_plans_without_servers_or_with_workers_outside_a_worker_task") {
  const TrainingProgram program = build_program("mlp", {.kind = "sgd", .learning_rate = 0.1});
  const auto refusal = [&](const ParameterServerPlan& plan) {
    auto cluster = place_on_parameter_servers(program, plan);
    REQUIRE_FALSE(cluster.ok());
    return cluster.status().message();
  };
  CHECK(refusal({.servers = 0, .workers = {{graph::DeviceKind::cpu, 0, 1}}}).find("no parameter server") != std::string::npos);
  CHECK(refusal({.servers = 1}).find("no worker") != std::string::npos);
  CHECK(refusal({.servers = 2, .workers = {{graph::DeviceKind::cpu, 0, 1}}}).find("'/task:1/cpu:0' must name a worker's task") !=
        std::string::npos);
  CHECK(refusal({.servers = 1, .workers = {{graph::DeviceKind::cpu, 0}}}).find("must name a worker's task") != std::string::npos);
  CHECK(refusal({.servers = 1, .workers = {{graph::DeviceKind::cpu, 0, 1}, {graph::DeviceKind::cpu, 1, 1}}})
            .find("two devices of task 1") != std::string::npos);
}

// One device's training in which step t applies the gradients of the variables as they were before
// step max(0, t - k) on global batch t (computed by a second session holding those variables, and fed
// to the first's updates): the variables it ends with, and at each step each worker's share's loss at
// the variables its gradients were computed on.
struct StaleReference {
  std::map<std::string, std::vector<double>> variables;
  std::vector<std::vector<double>> share_losses;  // [step][worker]
};

StaleReference train_with_stale_gradients(const TrainingProgram& program, const std::vector<std::vector<Batch>>& shares, int k) {
  runtime::Session trainer(program.graph, ops::kernels(), {.threads = 2});
  runtime::Session reader(program.graph, ops::kernels(), {.threads = 2});
  std::vector<graph::ValueRef> variables, gradients;
  for (const auto& [variable, gradient] : program.variables_and_gradients) {
    REQUIRE(gradient.output == 0);  // fed by its node's name
    variables.push_back(variable);
    gradients.push_back(gradient);
  }
  REQUIRE(trainer.run({}, variables).ok());  // their initial values
  std::vector<std::map<std::string, runtime::Tensor>> before;  // before[t]: the trained variables before step t
  StaleReference reference;
  for (size_t step = 0; step < shares.front().size(); ++step) {
    before.emplace_back();
    for (const auto& [variable, gradient] : program.variables_and_gradients) {
      const std::string& name = program.graph.node(variable.node).name;
      before.back().emplace(name, *trainer.read_variable(name));
    }
    for (const auto& [name, value] : before[step >= static_cast<size_t>(k) ? step - static_cast<size_t>(k) : 0]) {
      reader.assign_variable(name, value);
    }
    std::vector<Batch> parts;
    reference.share_losses.emplace_back();
    for (const std::vector<Batch>& worker : shares) {
      parts.push_back(worker[step]);
      auto loss = reader.run(feeds(program, worker[step]), {program.signature.loss});
      REQUIRE_MESSAGE(loss.ok(), loss.status().to_string());
      reference.share_losses.back().push_back(scalar((*loss)[0]));
    }
    const runtime::Feeds batch = feeds(program, join(parts));
    auto computed = reader.run(batch, gradients);
    REQUIRE_MESSAGE(computed.ok(), computed.status().to_string());
    runtime::Feeds fed = batch;
    for (size_t j = 0; j < gradients.size(); ++j) fed[program.graph.node(gradients[j].node).name] = (*computed)[j];
    const graph::Status updated = trainer.run(fed, {}, {program.signature.train}).status();
    REQUIRE_MESSAGE(updated.ok(), updated.to_string());
  }
  reference.variables = float_variables(trainer);
  return reference;
}

void check_trains_with_stale_variables(const Case& c) {
  INFO(describe(c));
  const TrainingProgram program = build_program(c.model, c.optimizer);
  const std::vector<std::vector<Batch>> shares = worker_shares(c);
  const StaleReference reference = train_with_stale_gradients(program, shares, c.staleness);

  const ParameterServerMode mode{.staleness = c.staleness};
  ParameterServerPlan plan{.servers = c.servers, .min_shard_bytes = c.min_shard_bytes, .mode = mode};
  for (int w = 0; w < c.workers; ++w) plan.workers.push_back({graph::DeviceKind::cpu, 0, c.servers + w});
  auto cluster = place_on_parameter_servers(program, plan);
  REQUIRE_MESSAGE(cluster.ok(), cluster.status().to_string());
  auto tasks = parameter_server_tasks(*cluster, {}, mode);
  REQUIRE_MESSAGE(tasks.ok(), tasks.status().to_string());
  for (const auto& [task, part] : *tasks) {
    const int named = task;  // doctest's messages are lambdas, which may not capture a structured binding (clang 14)
    CHECK_MESSAGE(part.pulls != graph::kInvalidNode, "task " << named << " has no pulls");
  }
  REQUIRE(c.over_grpc);  // a gRPC send does not wait for its receive, as the servers' early pulls need
  const std::vector<std::unique_ptr<runtime::Session>> sessions = task_sessions(c, *tasks, program_fingerprint(cluster->graph));
  // Each task at its own pace: a server sends its pulls k times, then steps; a worker steps (each
  // reporting its loss), then receives the pulls of the servers' last k steps.
  std::vector<std::future<graph::Expected<std::vector<double>>>> runs;
  for (int task = 0; task < c.servers + c.workers; ++task) {
    runs.push_back(std::async(std::launch::async, [&, task]() -> graph::Expected<std::vector<double>> {
      runtime::Session& session = *sessions[static_cast<size_t>(task)];
      const TaskProgram& part = tasks->at(task);
      const std::vector<graph::NodeId> pulls = {part.pulls}, train = {part.signature.train};
      const bool worker = task >= c.servers;
      for (int i = 0; i < c.staleness && !worker; ++i) MIRRA_RETURN_IF_ERROR(session.run({}, {}, pulls).status());
      std::vector<double> losses;
      for (int step = 0; step < kSteps; ++step) {
        runtime::Feeds fed;
        std::vector<graph::ValueRef> fetches;
        if (worker) {
          fed = feeds(program, shares[static_cast<size_t>(task - c.servers)][static_cast<size_t>(step)]);
          fetches.push_back(part.signature.loss);
        }
        MIRRA_ASSIGN_OR_RETURN(const std::vector<runtime::Tensor> out, session.run(fed, fetches, train));
        if (worker) losses.push_back(scalar(out[0]));
      }
      for (int i = 0; i < c.staleness && worker; ++i) MIRRA_RETURN_IF_ERROR(session.run({}, {}, pulls).status());
      return losses;
    }));
  }
  for (int task = 0; task < c.servers + c.workers; ++task) {
    auto losses = runs[static_cast<size_t>(task)].get();
    REQUIRE_MESSAGE(losses.ok(), "task " << task << ": " << losses.status().to_string());
    if (task < c.servers) continue;
    const size_t w = static_cast<size_t>(task - c.servers);
    REQUIRE(losses->size() == static_cast<size_t>(kSteps));
    for (size_t step = 0; step < losses->size(); ++step) {
      CHECK((*losses)[step] == doctest::Approx(reference.share_losses[step][w]).epsilon(1e-5));
    }
  }
  check_servers_hold(sessions, c.servers, reference.variables);
}

TEST_CASE("ParameterServer.sync.with_staleness_k_each_step_reads_the_variables_k_steps_old") {
  const ops::Optimizer sgd{.kind = "sgd", .learning_rate = 0.1};
  const ops::Optimizer adam{.kind = "adam", .learning_rate = 0.01};
  const ops::Optimizer momentum{.kind = "momentum", .learning_rate = 0.05, .momentum = 0.9};
  for (const Case& c : {Case{"mlp", sgd, 1, 2, 128, true, 0, 1}, Case{"mlp", adam, 2, 2, 61, true, 64 << 10, 2},
                        Case{"small_cnn", momentum, 2, 3, 61, true, 0, 1}}) {
    check_trains_with_stale_variables(c);
  }
}

// Sparse pulls and pushes: the embedding model's lookups of its 100,000-row table run on the table's
// server, which updates the table by the gradient rows the workers send (ops/sparse_updates.h), so
// no worker receives or sends a value of the table's size and no task makes a table-sized gradient
// (synchronously, and asynchronously, where the server's loop for each worker receives that worker's
// ids before it pulls); synchronously, the variables equal one device's on the global batch, with
// SGD and with LazyAdam, and the workers receive less than a hundredth of what they receive with the
// lookups on the workers: the rows their batches use and the dense layer, not the whole 12.8 MB table.
TEST_CASE("ParameterServer.sync.embedding_lookups_run_on_the_servers_and_only_the_rows_used_cross") {
  const ops::Optimizer sgd{.kind = "sgd", .learning_rate = 0.1};
  const TrainingProgram program = build_program("embedding", sgd);
  const int64_t table_elements = kEmbeddingRows * 16;
  for (const bool asynchronous : {false, true}) {
    CAPTURE(asynchronous);
    ParameterServerPlan plan{.servers = 2, .mode = {.asynchronous = asynchronous}};
    for (int w = 0; w < 2; ++w) plan.workers.push_back({graph::DeviceKind::cpu, 0, 2 + w});
    auto cluster = cluster_program(program, plan);
    REQUIRE_MESSAGE(cluster.ok(), cluster.status().to_string());
    auto tasks = parameter_server_tasks(*cluster, {}, plan.mode);
    REQUIRE_MESSAGE(tasks.ok(), tasks.status().to_string());
    size_t ids_received_first = 0;  // asynchronously: by the table's server's loops, before they pull
    std::multiset<std::string> table_updates;
    for (const auto& [t, part] : *tasks) {
      const int task = t;  // doctest's messages are lambdas, which may not capture a structured binding (clang 14)
      for (const WorkerLoop& loop : part.loops) ids_received_first += loop.pull_recvs.size();
      for (const graph::Node& node : part.graph.nodes()) {
        if (node.op.find("Apply") != std::string::npos && part.graph.type(node.inputs[0]).shape.num_elements() == table_elements) {
          table_updates.insert(node.op);
        }
        // No table-sized gradient anywhere: the server applies the rows the workers send.
        CHECK_MESSAGE(node.op != "UnsortedSegmentSum", node.name << " on task " << task);
        if (node.op == "GatherV2") CHECK_MESSAGE(task < 2, node.name << " on task " << task);
        if (task < 2 || (node.op != "Send" && node.op != "Recv")) continue;
        const graph::ValueRef value = node.op == "Send" ? node.inputs.front() : graph::ValueRef{node.id, 0};
        CHECK_MESSAGE(part.graph.type(value).shape.num_elements() != table_elements, "worker " << task - 2 << " moves the table: " << node.name);
      }
    }
    CHECK(ids_received_first == (asynchronous ? 2 : 0));
    // One update of the table by rows, or asynchronously one per worker.
    const std::vector<std::string> by_rows(asynchronous ? 2 : 1, "SparseApplyGradientDescent");
    CHECK(table_updates == std::multiset<std::string>(by_rows.begin(), by_rows.end()));
  }
  const WorkerBytes sparse = check_trains_as_one_device(Case{"embedding", sgd, 2, 2, 64, true});
  // LazyAdam on the servers, as one device applies it (ops/sparse_updates.h).
  ops::Optimizer lazy_adam{.kind = "adam", .learning_rate = 0.01};
  lazy_adam.lazy = true;
  check_trains_as_one_device(Case{"embedding", lazy_adam, 2, 2, 61, true});
  const WorkerBytes dense = check_trains_as_one_device(Case{"embedding", sgd, 2, 2, 64, true, 0, 0, false});
  // With the lookups on the workers, a worker receives the whole table and still sends rows.
  CHECK(dense.received >= 2 * kSteps * table_elements * 8);
  CHECK(dense.sent < table_elements * 8);
  CHECK(sparse.received * 100 < dense.received);
  MESSAGE("bytes per worker step, sparse: " << sparse.received / (2 * kSteps) << " received, " << sparse.sent / (2 * kSteps)
          << " sent; dense: " << dense.received / (2 * kSteps) << " received, " << dense.sent / (2 * kSteps) << " sent");
}

// Asynchronous: each worker runs a copy of the one-replica program and holds no variable; each server
// has a loop per worker whose transfers are all of that worker's copy (the Sends' values its own
// reads, no Send waiting for a Recv, no update ordered after a Send) and whose updates apply that
// copy's gradients; with Adam on 2 servers, the updates read server 0's step count through a loop too.
TEST_CASE("ParameterServer.async.each_worker_a_copy_each_server_a_loop_per_worker") {
  const TrainingProgram program = build_program("mlp", {.kind = "adam", .learning_rate = 0.01});
  for (int servers : {1, 2}) {
    CAPTURE(servers);
    ParameterServerPlan plan{.servers = servers, .mode = {.asynchronous = true}};
    for (int w = 0; w < 2; ++w) plan.workers.push_back({graph::DeviceKind::cpu, 0, servers + w});
    auto cluster = place_on_parameter_servers(program, plan);
    REQUIRE_MESSAGE(cluster.ok(), cluster.status().to_string());
    auto tasks = parameter_server_tasks(*cluster, {}, {.asynchronous = true});
    REQUIRE_MESSAGE(tasks.ok(), tasks.status().to_string());
    REQUIRE(tasks->size() == static_cast<size_t>(servers + 2));
    for (int w = 0; w < 2; ++w) {
      const TaskProgram& worker = tasks->at(servers + w);
      CHECK(worker.loops.empty());
      REQUIRE(worker.signature.loss.valid());
      CHECK(worker.graph.node(worker.signature.loss.node).name.starts_with("replica_" + std::to_string(w) + "/"));
      CHECK(worker.graph.find("images"));  // the batch input by its one-replica name
      for (const graph::Node& node : worker.graph.nodes()) {
        if (node.op == "Variable") FAIL("worker " << w << " holds variable '" << node.name << "'");
      }
    }
    for (int s = 0; s < servers; ++s) {
      CAPTURE(s);
      const TaskProgram& server = tasks->at(s);
      REQUIRE(server.loops.size() == 2);
      size_t transfers = 0;
      for (const graph::Node& node : server.graph.nodes()) {
        transfers += node.op == "Send" || node.op == "Recv";
        for (graph::NodeId control : node.control_inputs) CHECK(server.graph.node(control).op != "Send");
      }
      for (int w = 0; w < 2; ++w) {
        const WorkerLoop& loop = server.loops[static_cast<size_t>(w)];
        CHECK(loop.worker_task == servers + w);
        CHECK(loop.apply != graph::kInvalidNode);
        CHECK_FALSE(loop.sends.empty());
        CHECK_FALSE(loop.recvs.empty());
        REQUIRE(loop.pulled.size() == loop.sends.size());
        const std::string copy = "replica_" + std::to_string(w) + "/";
        for (graph::ValueRef pulled : loop.pulled) CHECK(server.graph.node(pulled.node).name.starts_with(copy));
        for (graph::NodeId recv : loop.recvs) {
          CHECK(graph::checked_attr<std::string>(server.graph.node(recv), "group").starts_with(copy));
        }
        transfers -= loop.sends.size() + loop.recvs.size();
      }
      CHECK(transfers == 0);
    }
  }
}

}  // namespace
}  // namespace mirra::strategies::test
