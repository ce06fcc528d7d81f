// A session's variables under their replica-free names (strategies::replica_free_name), which is how
// model files and checkpoints store them: reading takes replica 0's copy (replicas are bitwise
// equal) or the one host copy; writing sets every copy. A sharded optimizer slot (shard_optimizer_state:
// each replica holds a flat share) is read as its replicas' shares joined in replica order (across
// workers, in runtime::worker_share's order), under the whole variable's shape, and written by
// cutting the whole value into the shares. A parameter server's part of a variable (partition_of:
// rows of it) is written with those rows of the whole value; join_partitions joins the parts read
// from every server. So a checkpoint saved
// under one strategy, replica count and sharding restores under any other. Gradient accumulation's accumulators are neither read nor
// written (strategies::is_accumulator: zero between steps). Loss scaling's state may be there or not
// on either side: a run without loss scaling ignores it, and one with it starts from the initial
// scale when the source lacks it (fp16 mixed precision can be switched on and off between runs).
#pragma once

#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "ops/collective_ops.h"
#include "runtime/collectives/worker_communicator.h"
#include "runtime/session.h"
#include "ops/optimizers.h"
#include "serialization/model_file.h"
#include "serialization/tensor_codec.h"

namespace mirra::runner {

// Every variable of the session's graph except `skip`, sorted by name (creating any that no step has
// touched yet from its initialiser); sharded slots joined from the replicas' shares. A slot sharded
// across workers cannot be joined in one process (internal_error): gather_variables.
graph::Expected<std::vector<serialization::NamedTensor>> read_variables(runtime::Session& session,
                                                                        std::string_view skip = {});

// read_variables across the workers of a multi-worker run, a collective call every worker makes at
// the same point: each sharded slot is joined from the shares of every replica of every worker
// (runtime::worker_share's order), and every worker receives the whole values.
graph::Expected<std::vector<serialization::NamedTensor>> gather_variables(runtime::Session& session, std::string_view skip,
                                                                          runtime::WorkerCommunicator& workers,
                                                                          runtime::CollectiveClock::time_point deadline);

// Sets each named variable (every replica's copy; for a sharded slot, the share of it each replica of
// worker `part` holds). A name no Variable has, or a dtype or shape that differs, is an error naming
// it and `source`; with `require_all`, so is a variable of the graph (other than `skip`) that `values`
// lacks; and so is any value check_values refuses.
graph::Status write_variables(runtime::Session& session, const std::vector<serialization::NamedTensor>& values,
                              bool require_all, std::string_view source, std::string_view skip = {},
                              const ops::WorkerPart& part = {});

// `values` with the parts of each partitioned variable of `cluster` (Variables with partition_of,
// named "<variable>/part_<i>") replaced by the whole variable, their rows joined in order. A part
// missing, or of another dtype or row size, is an internal error naming the variable.
graph::Expected<std::vector<serialization::NamedTensor>> join_partitions(std::vector<serialization::NamedTensor> values,
                                                                         const graph::Graph& cluster);

// Every name under which `values` for `g`'s variables go: its Variables' replica-free names, and the
// whole variable's name for each part of a partitioned one.
std::set<std::string, std::less<>> variable_names(const graph::Graph& g);

// The model file a training run saves: `model`'s graph and signature, `values` its weights (the
// variables of its graph) and optimizer state (the rest), with `optimizer`'s hyper-parameters.
serialization::Model trained_model(const serialization::Model& model, const ops::Optimizer& optimizer,
                                   std::vector<serialization::NamedTensor> values);

// An error naming `source` and the first value that holds a NaN or an infinity, or that is a negative
// optimizer iteration count: no such value enters a session or reaches a file.
graph::Status check_values(const std::vector<serialization::NamedTensor>& values, std::string_view source);

}  // namespace mirra::runner
