// ParameterServerStrategy's rewrites: the variables, their optimizer slots and their updates live on
// parameter-server tasks; every worker task trains one replica on the batch it reads itself.
// Synchronous: each step the workers receive the variables, compute their gradients scaled by their
// share of the global batch, and send them to the variables' servers, which sum them per variable
// and apply one update: one device's training on the global batch. It is CentralStorage over the
// workers' devices with server 0 as its host and each replica feeding its own batch
// (ReplicationPlan::replicas_feed_their_batches), the variables then spread over the servers, the
// largest first onto the least loaded; a variable above the plan's min_shard_bytes is cut into parts
// first, which land on different servers, and each worker joins the parts it reads. An embedding
// lookup of a whole variable, and the scatter of its gradient's rows, run on its server. Cut by task
// (ops::partition_by_task), each task's session runs its part every step; the parts exchange values
// as Send and Recv over a communicator that offers them. With a staleness bound k > 0, a server
// sends the variables of its step t for the workers' step t + k (the first k steps read the starting
// values), so a worker computes step t on the variables as they were k steps earlier and runs up to
// k steps ahead of the slowest; each worker then reports its own share's loss.
// Asynchronous (TensorFlow's ParameterServerStrategy as its coordinator runs it): the one-replica
// program once per worker, each copy reading the variables through reads of its own on their servers
// (its lookups of a variable's rows there too) and applying its own gradients there, scaled by its
// own batch alone; a server serves each worker's steps as they come (WorkerLoop), and no worker waits
// for another.
//
//   auto cluster = strategies::place_on_parameter_servers(program, {.servers = 2, .workers = {
//       graph::DeviceId{graph::DeviceKind::cpu, 0, 2}, graph::DeviceId{graph::DeviceKind::cpu, 0, 3}}});
//   auto tasks = strategies::parameter_server_tasks(*cluster);
//   // task t: Session session(tasks->at(t).graph, kernels(), {.communicators = {transfers}, .task = t});
//   //         each step: session.run(feeds (a worker's batch), fetches, tasks->at(t).step_targets);
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "graph/device_id.h"
#include "ops/collective_ops.h"
#include "strategies/strategy.h"

namespace mirra::strategies {

// How the servers apply the workers' gradients.
struct ParameterServerMode {
  bool asynchronous = false;
  // Synchronous: how many steps old the variables a worker's step reads are (the steps it may run
  // ahead of the slowest worker); 0: each step reads the last step's update.
  int staleness = 0;
};

struct ParameterServerPlan {
  int servers = 1;  // tasks 0 .. servers - 1, on their cpu:0
  // One replica on each, every one a device of its own worker task (numbered from `servers` up).
  std::vector<graph::DeviceId> workers;
  // Trained variables of at least twice this many bytes are cut along axis 0 into parts, up to one
  // per server (strategies/variable_partitioning.h); 0: every variable whole.
  int64_t min_shard_bytes = 0;
  ParameterServerMode mode;
  // An embedding lookup (GatherV2 along axis 0) of a whole variable runs on its server, and the
  // scatter of its gradient's rows too, so that only the rows a batch uses cross the network (sparse
  // pulls and pushes); false (and synchronously with staleness, whose workers must not wait for their
  // servers' step): the worker receives the whole variable, and sends its whole gradient unless the
  // update is made row-wise (ops/sparse_updates.h, which Strategy::distribute runs: then its rows).
  bool lookups_on_servers = true;
};

// The program of the whole cluster: every node on a device of its task. Its signature's loss,
// correct count and metrics are the global batch's, computed on server 0. Errors: no server or
// worker, a worker device without a task of its own above the servers', gradient accumulation.
graph::Expected<TrainingProgram> place_on_parameter_servers(const TrainingProgram& program, const ParameterServerPlan& plan);

// The Strategy over config.cluster's servers and workers (StrategyConfig::cluster), each worker's
// replica on config.devices' one device; make_strategy's for "parameter_server".
graph::Expected<std::unique_ptr<Strategy>> make_parameter_server_strategy(StrategyConfig config);

// Each variable's server, by index in `bytes` (their sizes): the largest first, each onto the server
// holding the fewest bytes so far (the lowest such index on a tie). Variables with the same
// non-empty `whole` name (the parts of one variable) go onto different servers while there are some.
std::vector<int> assign_servers(const std::vector<int64_t>& bytes, int servers, const std::vector<std::string>& whole = {});

// Asynchronous training: what a server does for each step of one worker: receive what `pull_recvs`
// would (the ids of the worker's embedding lookups, which run on the server); under a shared lock of
// its variables, fetch `pulled` with those fed and copy it; with no lock, send the copies as `sends`
// would (the worker's variables and looked-up rows, and values other servers' updates for this
// worker read) and receive what `recvs` would (the worker's gradients, and the other servers'
// values); then, with all it received fed to the Recv nodes and the lock held alone, run `apply`.
// Every transfer of a loop names its worker's copy, so the loop's n-th step meets the n-th step of
// its worker (and of the other servers' loops for that worker) whatever the other loops do.
struct WorkerLoop {
  int worker_task = 0;
  std::vector<graph::ValueRef> pulled;  // what `sends` send: single-output nodes, fed by name
  std::vector<graph::NodeId> sends;
  std::vector<graph::NodeId> pull_recvs;  // what `pulled` needs from the worker's step (sent before it receives anything)
  std::vector<graph::NodeId> recvs;
  graph::NodeId apply = graph::kInvalidNode;  // the worker's updates on this server; invalid for none
};

// One task's part of the cluster's program.
struct TaskProgram {
  graph::Graph graph;
  // Its step is `signature.train`: after the part's Sends, its Recvs and its share of the update. On a
  // worker, the batch inputs keep the one-replica program's names, and the loss, correct count and
  // metrics are the global batch's, received from server 0 (which computes them), or with staleness
  // its own share's; on another server, the signature holds only the step.
  // Asynchronously a worker's signature is its copy's (its own batch's loss, correct count and
  // metrics); a server's holds no step but `loops`.
  runtime::training::TrainingGraph signature;
  std::vector<WorkerLoop> loops;  // an asynchronous server's: one per worker
  // With staleness k > 0: on a server, a target of its pulls alone (its Sends to workers of what
  // its step reads before it receives anything: the variables), which it runs k times before its
  // first step (the first k steps' variables); on a worker, of the Recvs of those, which it runs k
  // times after its last step (the servers' last k steps send values no step reads). Invalid for
  // none.
  graph::NodeId pulls = graph::kInvalidNode;
};

// The cluster's program (place_on_parameter_servers) cut by task, its Sends and Recvs calling
// `transfers`' implementation with its deadline. `mode` as the plan that made it.
graph::Expected<std::map<int, TaskProgram>> parameter_server_tasks(const TrainingProgram& cluster,
                                                                   const ops::CollectiveOptions& transfers = {},
                                                                   const ParameterServerMode& mode = {});

// What every task of a cluster agrees on before they exchange values (runtime::GrpcCluster's
// fingerprint): the cluster program's text (graph::to_text), hashed (64-bit FNV-1a), in hex.
std::string program_fingerprint(const graph::Graph& cluster);

}  // namespace mirra::strategies
