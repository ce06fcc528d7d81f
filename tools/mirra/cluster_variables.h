// The variables of a parameter-server cluster between its steps, carried over the tasks' transfers:
// every server's gathered on server 0 (for the trained model --save writes and the checkpoints server
// 0 writes), and on --resume server 0's checkpoint handed out: every task the position training goes
// on from, and each task the values of the variables it holds (whole: a task holding a part of a cut
// variable writes its rows); and the gathered values sent to the worker that evaluates them. Every
// task makes the same calls in the same order: a gathering is a collective call of the servers, a
// resumption one of every task, a hand-over for evaluation one of the servers and that worker.
//
//   ClusterVariables variables(*transfers, {.task = t, .servers = 2, .timeout_s = 60, .skip = lr,
//                                            .held = held_by_task, .cluster = &cluster_graph});
//   MIRRA_ASSIGN_OR_RETURN(auto start, variables.resume(session, checkpoint));  // server 0 passes its latest
//   MIRRA_ASSIGN_OR_RETURN(auto values, variables.gather(session));  // on server 0: every variable, whole
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "runtime/collectives/communicator.h"
#include "runtime/session.h"
#include "serialization/checkpoint.h"

namespace mirra::runner {

struct ClusterVariablesOptions {
  int task = 0;
  int servers = 1;
  double timeout_s = 60;  // for each value to arrive
  std::string skip;       // a variable neither saved nor restored (the learning rate's)
  // Per task, the stored names of the variables its part of the program holds (variable_names).
  std::map<int, std::set<std::string, std::less<>>> held;
  const graph::Graph* cluster = nullptr;  // the program of the whole cluster
};

class ClusterVariables {
 public:
  ClusterVariables(runtime::Communicator& transfers, ClusterVariablesOptions options)
      : transfers_(transfers), options_(std::move(options)) {}

  // On server 0: every server's variables, the parts of cut ones joined, sorted by name. On another
  // server: its own, sent to server 0. Only servers call it.
  graph::Expected<std::vector<serialization::NamedTensor>> gather(runtime::Session& session);

  // Server 0, with the checkpoint it resumes from (nullopt: none, training starts afresh; an error:
  // it could not load one): tells every other task the position and sends each the values it
  // holds, and writes its own. Another task (`latest` ignored) receives them and writes them. The
  // position, or nullopt for none. A failure on server 0 (loading, or a checkpoint that lacks a
  // variable) reaches every other task as an error naming server 0.
  graph::Expected<std::optional<serialization::TrainingPosition>> resume(
      runtime::Session& session, const graph::Expected<std::optional<serialization::Checkpoint>>& latest);

 // Every server, with the values gather returned: server 0 sends them to `task` (a worker that
  // evaluates them), the others do nothing. That task calls receive_for_evaluation.
  graph::Status send_for_evaluation(const std::vector<serialization::NamedTensor>& values, int task);
  graph::Expected<std::vector<serialization::NamedTensor>> receive_for_evaluation();

 private:
  runtime::CollectiveCall call(const std::string& group, int64_t instance, int participant, int peer) const;
  graph::Status resume_from_server_0(runtime::Session& session,
                                     const graph::Expected<std::optional<serialization::Checkpoint>>& latest);

  runtime::Communicator& transfers_;
  ClusterVariablesOptions options_;
  // Per task, the names of `values` (a checkpoint's, by name) that it holds, each held variable found
  // there (loss scaling's state may be missing); an error names the first that is not.
  graph::Status names_by_task(const std::map<std::string_view, const serialization::NamedTensor*>& values,
                              std::map<int, std::vector<std::string>>& names) const;
  // Server 0 sends `task` the names, then each value, under `prefix`; a task receives them from it.
  graph::Status send_values(int task, const std::string& prefix, int64_t instance,
                            const std::vector<const serialization::NamedTensor*>& values);
  graph::Expected<std::vector<serialization::NamedTensor>> receive_values(const std::string& prefix, int64_t instance);

  int64_t gatherings_ = 0;   // numbers each gathering's transfers
  int64_t evaluations_ = 0;  // and each hand-over for evaluation
};

}  // namespace mirra::runner
