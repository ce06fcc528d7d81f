// Strategy: turns one replica's training program into a distributed one. The program is a graph with
// the Trainer's signature (batch inputs, loss, correct count, train target, learning rate), the
// (variable, gradient) pairs that minimize() made, and the step state that exists once. A strategy
// only rewrites the graph; the Session and the Trainer run the result unchanged, so swapping
// strategies is a config change.
//
//   auto strategy = strategies::make_strategy(*strategies::load_strategy_config("mirrored.json"));
//   auto distributed = (*strategy)->distribute(program);
//   runtime::Session session(distributed->graph, ops::kernels());
//   runtime::training::Trainer trainer(session, distributed->signature, {.epochs = 5});
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "graph/graph.h"
#include "ops/collective_ops.h"
#include "ops/registry.h"
#include "runtime/training/trainer.h"
#include "strategies/all_reduce_plan.h"
#include "strategies/config.h"

namespace mirra::strategies {

struct TrainingProgram {
  graph::Graph graph;
  runtime::training::TrainingGraph signature;
  // After a sharded rewrite (shard_optimizer_state) the gradient is replica 0's share of the sum.
  std::vector<std::pair<graph::ValueRef, graph::ValueRef>> variables_and_gradients;
  // The seed of the gradients (ops::TrainOp::loss_gradient): a replicating strategy scales it by each
  // replica's share of the batch. Invalid after replication.
  graph::ValueRef loss_gradient;
  std::vector<graph::NodeId> step_state;  // learning rate, iteration counter and its increment
  // Values besides the signature's that tasks report, kept with it: each parameter-server worker's own
  // loss, correct count and metrics where it reports its own (asynchronous: the signature holds
  // worker 0's; bounded staleness: the signature holds the global batch's).
  std::vector<graph::ValueRef> reported;
  // Gradient accumulation: a strategy then also builds signature.accumulate, which adds a
  // micro-batch's gradients to accumulators on each replica without updating anything; the next
  // train step adds its own, applies the gradient of the mean loss over every example since the last
  // update, and clears the accumulators. (Set by the caller, kept by distribute.)
  bool accumulate_gradients = false;
  // The op schemas the graph was built with (or its model file loaded with): the built-in ones, or a
  // program's own registry that adds ops of its own (ops/README.md, "Ops outside the tree").
  // The rewrite adds nodes and checks its result against it; it must outlive the program.
  const graph::OpRegistry* ops = &mirra::ops::registry();
};

class Strategy {
 public:
  virtual ~Strategy() = default;
  virtual const StrategyConfig& config() const = 0;
  // REQUIRES: `program` trains one replica; its loss is a mean over the batch (ReduceMean) plus or
  // minus terms that do not depend on the batch (strategies/batch_mean_loss.h).
  // ENSURES: the result trains the same model over config().devices; one step on a global batch B
  // updates the variables as one device would on the same B.
  graph::Expected<TrainingProgram> distribute(const TrainingProgram& program) const { return distribute(program, {}); }
  // Across workers (across_workers()), `part` names the worker whose graph to build: the workers'
  // graphs differ only in which shares of sharded optimizer state each one holds. The program is
  // pruned before and after the rewrite (strategies/pruning.h: the result holds only what its steps
  // need, and every variable), and the nodes the result's steps run are checked against their ops'
  // schemas (graph::verify_types): a rewrite that broke one is an internal error naming it.
  graph::Expected<TrainingProgram> distribute(const TrainingProgram& program, const ops::WorkerPart& part) const;
  // Whether its collectives span worker processes (multi_worker_mirrored): the session then needs
  // the workers' collective (runtime/collectives/worker_communicator.h), and each worker feeds its
  // shard of every global batch.
  virtual bool across_workers() const { return false; }
  // Where the gradients are summed (a single replica's stay in place).
  virtual AllReducePlan all_reduce_plan() const { return plan_all_reduce(config().devices, {}); }
  // "mirrored over cpu:0, cpu:1" (", optimizer state sharded" with shard_optimizer_state)
  std::string describe() const;

 private:
  // The strategy's rewrite itself (distribute's contract, before the check).
  virtual graph::Expected<TrainingProgram> rewrite(const TrainingProgram& program, const ops::WorkerPart& part) const = 0;
};

graph::Expected<std::unique_ptr<Strategy>> make_strategy(const StrategyConfig& config);

// Whether a variable, by replica-free name, is an accumulator of gradient accumulation
// ("accumulate/..."): state within one step and zero between steps, so checkpoints and model files
// leave it out.
bool is_accumulator(std::string_view name);

// A node's name in the one-replica program it was made from: "replica_<r>/<name>" gives <name> and
// sets *replica to r; a node that exists once keeps its name and gets *replica = -1. Checkpoints
// store variables under these names, so any strategy restores them.
std::string_view replica_free_name(std::string_view name, int* replica);

// A variable part's name ("<variable>/part_<i>", strategies/variable_partitioning.h) gives the whole
// variable's and sets *part to i; any other name comes back as it is, with *part = -1. Checkpoints
// store the whole variable, joined from its parts.
std::string_view partition_free_name(std::string_view name, int* part);

// The name under which checkpoints and model files store a Variable node's value: its replica-free
// name, and for a part of a cut variable (attr partition_of), the whole variable's.
std::string_view stored_variable_name(const graph::Node& variable);

}  // namespace mirra::strategies
