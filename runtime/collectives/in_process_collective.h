// InProcessCollective: the Collective whose participants are devices of this process (the logical
// CPU devices of a Mirrored session). Participants meet at a rendezvous keyed by (group, instance);
// the last to arrive runs the operation on its own thread, in parallel on oneTBB, and completes
// every participant. Nothing waits for peers: a participant that arrives early only leaves its
// buffers and callback. A watchdog thread (started the first time a call waits with a deadline)
// fails a rendezvous whose deadline passed with deadline_exceeded, naming who did not arrive.
//
// All-reduce reads every participant's buffer once and writes every output once, summing in
// participant order in L1-sized blocks, so every participant receives the same bits whatever the
// thread count (Note [In-process all-reduce] in the .cc).
#pragma once

#include <condition_variable>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "runtime/collectives/collective.h"

namespace mirra::runtime {

class InProcessCollective final : public Collective {
 public:
  InProcessCollective() = default;
  // Participants still waiting are completed with `aborted`.
  ~InProcessCollective() override;

  std::string_view name() const override { return "in_process"; }
  int rank() const override { return 0; }
  int world_size() const override { return 1; }

  void all_reduce(const CollectiveCall& call, Reduction reduction, std::span<const Tensor> inputs,
                  std::span<Tensor> outputs, CollectiveDone done) override;
  void reduce_scatter(const CollectiveCall& call, Reduction reduction, std::span<const Tensor> inputs,
                      std::span<Tensor> outputs, CollectiveDone done) override;
  void all_gather(const CollectiveCall& call, std::span<const Tensor> inputs, std::span<Tensor> outputs,
                  CollectiveDone done) override;
  void broadcast(const CollectiveCall& call, int root, Tensor& buffer, CollectiveDone done) override;
  void abandon(int64_t instance, const graph::Status& why) override;

  // What one participant brought to a rendezvous (public for the implementation file's helpers).
  enum class Kind { all_reduce, reduce_scatter, all_gather, broadcast };
  struct Arrival {
    Kind kind = Kind::all_reduce;
    Reduction reduction = Reduction::sum;
    int root = 0;
    std::span<const Tensor> inputs;
    std::span<Tensor> outputs;
    CollectiveDone done;
  };

 private:
  using Key = std::pair<std::string, int64_t>;  // (group, instance)
  struct Rendezvous {
    int group_size = 0;
    CollectiveClock::time_point deadline;
    CollectiveClock::time_point first_arrival;
    std::vector<Arrival> arrivals;  // by participant; `done` empty until it arrives
    int arrived = 0;
  };

  void arrive(const CollectiveCall& call, Arrival arrival);
  void watch_deadlines();

  std::mutex mutex_;
  std::condition_variable deadline_changed_;
  std::map<Key, Rendezvous> pending_;
  std::set<Key> expired_;  // so that a late participant fails at once instead of waiting again
  std::map<int64_t, graph::Status> abandoned_;  // failed instances (steps), with why: their calls fail at once
  std::thread watchdog_;
  bool stopping_ = false;
};

}  // namespace mirra::runtime
