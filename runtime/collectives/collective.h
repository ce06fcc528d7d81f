// Collective: the operations that span the participants of a group (the replicas of a strategy):
// all_reduce, reduce_scatter, all_gather and broadcast over tensors. A call is keyed by its group
// and instance, completes through a callback (never by blocking the caller while peers are
// missing), and carries a deadline past which it fails with deadline_exceeded naming who did not
// arrive. The instance of a call is its group's sequence number: a session numbers each group's
// executions (runtime/session.h), so that processes agree on it without running the same sequence of
// steps. Implementations: in process (InProcessCollective: the participants are devices of this
// process) and across worker processes over MPI (runtime/collectives/worker_collective.h), their
// participants meeting at a Rendezvous (runtime/collectives/rendezvous.h). NCCL,
// between the GPUs of one process, is not one: its ranks are nodes of their own (PeerAllReduce and
// its siblings), whose GPU kernels meet through PeerMeetings (runtime/collectives/peer_meetings.h).
// CollectiveSet is a session's table of them.
//
//   collective.all_reduce({.group = "bucket_0", .instance = step, .participant = r, .group_size = n,
//                          .deadline = deadline_after(timeout)},
//                         Reduction::sum, inputs, outputs, [](Status s) { ... });
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "graph/status.h"
#include "runtime/tensor.h"

namespace mirra::runtime {

enum class Reduction { sum, mean };

using CollectiveClock = std::chrono::steady_clock;

// One execution of a collective: its group, and which of the group's executions it is.
struct CollectiveInstance {
  std::string group;
  int64_t instance = 0;
  auto operator<=>(const CollectiveInstance&) const = default;
};

struct CollectiveCall {
  std::string group;      // names the collective and who takes part; every participant passes the same
  int64_t instance = 0;   // which execution of the group (its sequence number); every participant passes the same
  int participant = 0;    // the caller, in [0, group_size)
  int group_size = 1;
  CollectiveClock::time_point deadline = CollectiveClock::time_point::max();
};

// `timeout` from now; a timeout of zero or less means none.
CollectiveClock::time_point deadline_after(std::chrono::milliseconds timeout);

// Called exactly once per call, from any thread, when the collective finished for this participant.
using CollectiveDone = std::function<void(graph::Status)>;

class Collective {
 public:
  virtual ~Collective() = default;
  // "in_process"
  virtual std::string_view name() const = 0;
  // This process among the processes the collective spans (0 of 1 for one process).
  virtual int rank() const = 0;
  virtual int world_size() const = 0;

  // The tensors (spans and buffers) must stay valid until `done` is called; outputs are allocated
  // by the caller and receive the results. An implementation overrides the operations it offers;
  // the others complete with unimplemented: "broadcast 'g' is not supported by <name>".
  //
  // outputs[j] = the sum (or mean) over participants of their inputs[j]. Every participant passes
  // the same count, dtypes (f32, f64, or bf16: summed in f32, rounded once) and shapes; every
  // participant receives the same bits. An output may share its input's buffer (in place).
  virtual void all_reduce(const CollectiveCall& call, Reduction reduction, std::span<const Tensor> inputs,
                          std::span<Tensor> outputs, CollectiveDone done);
  // outputs[j] = this participant's share of the reduction of every participant's inputs[j], in
  // flat element order: shares differ by at most one element, the first (count mod group_size)
  // larger. Across W worker processes (world_size() > 1) participant p of worker w receives
  // worker_share(count, group_size, p, W, w): share p, cut again among the workers. (Several tensors
  // make one call: a bucket.)
  virtual void reduce_scatter(const CollectiveCall& call, Reduction reduction, std::span<const Tensor> inputs,
                              std::span<Tensor> outputs, CollectiveDone done);
  // outputs[j] = every participant's inputs[j] stacked along dim 0 in participant order. Across
  // workers it undoes reduce_scatter: participant p of worker w brings rows worker_share(rows,
  // group_size, p, W, w) of outputs[j] (whose dim 0 gives `rows`), and every participant receives all.
  virtual void all_gather(const CollectiveCall& call, std::span<const Tensor> inputs, std::span<Tensor> outputs,
                          CollectiveDone done);
  // `buffer` = participant `root`'s buffer, on every participant. Across W workers the participants
  // are numbered worker by worker: participant p of worker w is w * group_size + p.
  virtual void broadcast(const CollectiveCall& call, int root, Tensor& buffer, CollectiveDone done);
  // Execution `which` failed elsewhere (a node of its step): its calls still waiting for
  // participants that will not come complete with `why` now, and later ones at once, instead of at
  // their deadline. Collectives whose participants are other processes leave it to the deadline.
  virtual void abandon(const CollectiveInstance& which, const graph::Status& why) {
    (void)which;
    (void)why;
  }
};

// Called for each collective execution of a step that a session abandoned, and why.
using AbandonObserver = std::function<void(const CollectiveInstance& which, const graph::Status& why)>;

// The collectives a session offers its kernels, by name; "auto" is the first one added. Kernels
// that meet their peers outside a Collective (NCCL's ranks on GPUs) observe the session's abandoned
// steps through it.
class CollectiveSet {
 public:
  void add(std::shared_ptr<Collective> collective) { collectives_.push_back(std::move(collective)); }
  // not_found naming the implementations there are.
  graph::Expected<Collective*> find(std::string_view name) const;
  // Collective::abandon of each execution on each collective, then every observer.
  void abandon(std::span<const CollectiveInstance> executions, const graph::Status& why) const;
  // `observer` is called for every execution abandoned from now on; the set keeps it (and what it
  // holds) until the set is destroyed. Thread-safe.
  void observe_abandoned(AbandonObserver observer) const;

 private:
  struct Observers {
    std::mutex mutex;
    std::vector<AbandonObserver> list;
  };
  std::vector<std::shared_ptr<Collective>> collectives_;
  std::unique_ptr<Observers> observers_ = std::make_unique<Observers>();
};

// The share of `count` elements (or examples) that participant p of `group_size` gets: they
// differ by at most one, the first (count mod group_size) larger. TensorFlow's rule.
inline int64_t participant_share(int64_t count, int64_t group_size, int64_t p) {
  return count / group_size + (p < count % group_size ? 1 : 0);
}

// A run of elements (or rows) [first, first + count).
struct ShareRange {
  int64_t first = 0;
  int64_t count = 0;
};

// Where participant p of `group_size` on worker w of `workers` keeps its part of `count` elements:
// share p of the group (participant_share), cut again among the workers by the same rule. The parts
// tile [0, count) in order (p, w): p's share first, worker by worker. One worker (w = 0 of 1) gives
// share p itself.
ShareRange worker_share(int64_t count, int64_t group_size, int64_t p, int64_t workers, int64_t w);

}  // namespace mirra::runtime
