// Communicator: the operations that span the participants of a group (the replicas of a strategy),
// in the manner of c10d's Backend: all_reduce, reduce_scatter, all_gather and broadcast over
// tensors, and send and receive between two. A call is keyed by its group and instance and returns a Work handle at once (never
// blocking the caller while peers are missing): done, wait with a deadline, a callback when it
// finishes, abort. Every call carries a deadline past which it fails with deadline_exceeded naming
// who did not arrive. The instance of a call is its group's sequence number: a session numbers each
// group's executions (runtime/session.h), so that processes agree on it without running the same
// sequence of steps. Implementations: in process (InProcessCommunicator: the participants are
// devices of this process) and across worker processes over MPI (runtime/collectives/
// worker_communicator.h), their participants meeting at a Rendezvous (runtime/collectives/
// rendezvous.h), a peer library's among the devices of one process that issues on the devices'
// own streams (PeerCommunicator: NCCL's between GPUs, runtime/collectives/peer_communicator.h), and
// those registered from outside the tree (communicator_registry.h); a session finds them by name
// (CommunicatorSet). The collective ops' kernels call one per rank (ops/collective_ops.h).
//
//   std::shared_ptr<Work> work = communicator.all_reduce(
//       {.group = "bucket_0", .instance = 7, .participant = r, .group_size = n, .deadline = deadline_after(timeout)},
//       Reduction::sum, inputs, outputs);
//   work->then([](Status s) { ... });  // or: Status s = work->wait(deadline);
#pragma once

#include <chrono>
#include <condition_variable>
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

class Device;

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
  int peer = -1;          // send and recv: the process (worker rank) on the other side; -1: this process
  // The caller's device, for communicators that issue on its streams (a peer library's: NCCL's); the
  // others take host memory and leave it unread.
  const Device* device = nullptr;
  CollectiveClock::time_point deadline = CollectiveClock::time_point::max();
};

// `timeout` from now; a timeout of zero or less, or one past the clock's end, means none.
CollectiveClock::time_point deadline_after(std::chrono::milliseconds timeout);

// Called exactly once per call, from any thread, when the collective finished for this participant.
using CollectiveDone = std::function<void(graph::Status)>;

class Communicator;

// One participant's call of a collective as it goes. Its communicator completes it once; the
// methods are thread-safe.
class Work {
 public:
  // Call `which` of `operation` ("all_reduce", a literal) on `communicator`, which aborts it.
  Work(std::string_view operation, CollectiveInstance which, Communicator* communicator)
      : operation_(operation), which_(std::move(which)), communicator_(communicator) {}
  Work(const Work&) = delete;
  Work& operator=(const Work&) = delete;

  // The call in messages: "all_reduce 'bucket_0' (instance 7)".
  std::string what() const;
  bool done() const;
  // Its status once done, else unavailable: "... has not finished".
  graph::Status status() const;
  // Waits until it is done and returns its status, or until `deadline` and returns deadline_exceeded
  // naming it (the call goes on: its tensors stay in use until it is done).
  graph::Status wait(CollectiveClock::time_point deadline = CollectiveClock::time_point::max());
  // `callback` is called once when it is done: at once, on this thread, when it is already.
  void then(CollectiveDone callback);
  // Fails the call with `why` while it waits for participants, and every other participant's part of
  // its execution (Communicator::abandon); a call that is running, or done, finishes as it would have.
  void abort(const graph::Status& why);

  // For communicators: completes it (the first time; later calls are ignored), calling its callbacks.
  void complete(graph::Status status);

 private:
  const std::string_view operation_;
  const CollectiveInstance which_;
  mutable std::mutex mutex_;
  std::condition_variable finished_;
  bool done_ = false;
  graph::Status status_;
  std::vector<CollectiveDone> callbacks_;
  Communicator* communicator_;  // until it is done: the communicator may go once its calls are done
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  // "in_process"
  virtual std::string_view name() const = 0;
  // This process among the processes the collective spans (0 of 1 for one process).
  virtual int rank() const = 0;
  virtual int world_size() const = 0;

  // The tensors (spans and buffers) must stay valid until the work is done; outputs are allocated
  // by the caller and receive the results. An operation the implementation does not offer is done at
  // once with unimplemented: "broadcast 'g' is not supported by <name>".
  //
  // outputs[j] = the sum (or mean) over participants of their inputs[j]. Every participant passes
  // the same count, dtypes (f32, f64, or bf16: summed in f32, rounded once) and shapes; every
  // participant receives the same bits. An output may share its input's buffer (in place).
  std::shared_ptr<Work> all_reduce(const CollectiveCall& call, Reduction reduction, std::span<const Tensor> inputs,
                                   std::span<Tensor> outputs);
  // outputs[j] = this participant's share of the reduction of every participant's inputs[j], in
  // flat element order: shares differ by at most one element, the first (count mod group_size)
  // larger. Across W worker processes (world_size() > 1) participant p of worker w receives
  // worker_share(count, group_size, p, W, w): share p, cut again among the workers. (Several tensors
  // make one call: a bucket.)
  std::shared_ptr<Work> reduce_scatter(const CollectiveCall& call, Reduction reduction, std::span<const Tensor> inputs,
                                       std::span<Tensor> outputs);
  // outputs[j] = every participant's inputs[j] stacked along dim 0 in participant order. Across
  // workers it undoes reduce_scatter: participant p of worker w brings rows worker_share(rows,
  // group_size, p, W, w) of outputs[j] (whose dim 0 gives `rows`), and every participant receives all.
  std::shared_ptr<Work> all_gather(const CollectiveCall& call, std::span<const Tensor> inputs, std::span<Tensor> outputs);
  // `buffer` = participant `root`'s buffer, on every participant. Across W workers the participants
  // are numbered worker by worker: participant p of worker w is w * group_size + p.
  std::shared_ptr<Work> broadcast(const CollectiveCall& call, int root, Tensor& buffer);
  // Point to point, in a group of two: participant 0 sends `value`; participant 1 receives it into
  // `value`, which is assigned a tensor of its own in host memory (a graph's values crossing from one
  // task to another). `call.peer` names the other side's process where it is another one; the
  // transfers of one group between two processes arrive in the order they were sent.
  std::shared_ptr<Work> send(const CollectiveCall& call, const Tensor& value);
  std::shared_ptr<Work> recv(const CollectiveCall& call, Tensor& value);

  // Execution `which` failed elsewhere (a node of its step): its calls still waiting for
  // participants that will not come complete with `why` now, and later ones at once, instead of at
  // their deadline. Collectives whose participants are other processes leave it to the deadline.
  virtual void abandon(const CollectiveInstance& which, const graph::Status& why) {
    (void)which;
    (void)why;
  }

 protected:
  // What an implementation overrides for each operation it offers: start the call and complete it
  // through `done`, exactly once, from any thread.
  virtual void start_all_reduce(const CollectiveCall& call, Reduction reduction, std::span<const Tensor> inputs,
                                std::span<Tensor> outputs, CollectiveDone done);
  virtual void start_reduce_scatter(const CollectiveCall& call, Reduction reduction, std::span<const Tensor> inputs,
                                    std::span<Tensor> outputs, CollectiveDone done);
  virtual void start_all_gather(const CollectiveCall& call, std::span<const Tensor> inputs, std::span<Tensor> outputs,
                                CollectiveDone done);
  virtual void start_broadcast(const CollectiveCall& call, int root, Tensor& buffer, CollectiveDone done);
  virtual void start_send(const CollectiveCall& call, const Tensor& value, CollectiveDone done);
  virtual void start_recv(const CollectiveCall& call, Tensor& value, CollectiveDone done);

 private:
  // A Work for `call` of `operation`, aborted through abandon, and the callback that completes it.
  std::pair<std::shared_ptr<Work>, CollectiveDone> begin(std::string_view operation, const CollectiveCall& call);
};

// Called for each collective execution of a step that a session abandoned, and why.
using AbandonObserver = std::function<void(const CollectiveInstance& which, const graph::Status& why)>;

// The collectives a session offers its kernels, by name; "auto" is the first one added. Kernels
// that meet their peers outside a Communicator (NCCL's ranks on GPUs) observe the session's abandoned
// steps through it.
class CommunicatorSet {
 public:
  void add(std::shared_ptr<Communicator> communicator) { communicators_.push_back(std::move(communicator)); }
  // not_found naming the implementations there are.
  graph::Expected<Communicator*> find(std::string_view name) const;
  // Communicator::abandon of each execution on each collective, then every observer.
  void abandon(std::span<const CollectiveInstance> executions, const graph::Status& why) const;
  // `observer` is called for every execution abandoned from now on; the set keeps it (and what it
  // holds) until the set is destroyed. Thread-safe.
  void observe_abandoned(AbandonObserver observer) const;

 private:
  struct Observers {
    std::mutex mutex;
    std::vector<AbandonObserver> list;
  };
  std::vector<std::shared_ptr<Communicator>> communicators_;
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
