// InProcessCommunicator: the Communicator whose participants are devices of this process (the logical
// CPU devices of a Mirrored session). Participants meet at a Rendezvous keyed by (group, instance);
// the last to arrive runs the operation on its own thread, in parallel on oneTBB, and completes
// every participant. Nothing waits for peers: a participant that arrives early only leaves its
// buffers and callback, and the rendezvous fails a meeting whose deadline passed naming who did not
// arrive (runtime/collectives/rendezvous.h).
//
// All-reduce reads every participant's buffer once and writes every output once, summing in
// participant order in L1-sized blocks, so every participant receives the same bits whatever the
// thread count (Note [In-process all-reduce] in the .cc).
#pragma once

#include <vector>

#include "runtime/collectives/communicator.h"
#include "runtime/collectives/rendezvous.h"

namespace mirra::runtime {

class InProcessCommunicator final : public Communicator {
 public:
  // Participants still waiting when it is destroyed are completed with `aborted`.
  InProcessCommunicator() = default;

  std::string_view name() const override { return "in_process"; }
  int rank() const override { return 0; }
  int world_size() const override { return 1; }

  void abandon(const CollectiveInstance& which, const graph::Status& why) override;

  // What one participant brought to a rendezvous (public for the implementation file's helpers).
  // transfer: participant 0 sends inputs[0], participant 1 receives it into outputs[0].
  enum class Kind { all_reduce, reduce_scatter, all_gather, broadcast, transfer };
  struct Arrival {
    Kind kind = Kind::all_reduce;
    Reduction reduction = Reduction::sum;
    int root = 0;
    std::span<const Tensor> inputs;
    std::span<Tensor> outputs;
    CollectiveDone done;
  };

 protected:
  void start_all_reduce(const CollectiveCall& call, Reduction reduction, std::span<const Tensor> inputs,
                        std::span<Tensor> outputs, CollectiveDone done) override;
  void start_reduce_scatter(const CollectiveCall& call, Reduction reduction, std::span<const Tensor> inputs,
                            std::span<Tensor> outputs, CollectiveDone done) override;
  void start_all_gather(const CollectiveCall& call, std::span<const Tensor> inputs, std::span<Tensor> outputs,
                        CollectiveDone done) override;
  void start_broadcast(const CollectiveCall& call, int root, Tensor& buffer, CollectiveDone done) override;
  void start_send(const CollectiveCall& call, const Tensor& value, CollectiveDone done) override;
  void start_recv(const CollectiveCall& call, Tensor& value, CollectiveDone done) override;

 private:
  void arrive(const CollectiveCall& call, Arrival arrival);

  Rendezvous<Arrival> meetings_;
};

}  // namespace mirra::runtime
