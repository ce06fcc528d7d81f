// PeerCommunicator: the Communicator of a peer library (NCCL between the GPUs of one process). Each
// participant's call names its device (CollectiveCall::device); the library makes the participant's
// part, which issues on that device's streams, and the parts meet through the process's PeerMeetings
// (peer_meetings.h: one group call, the watchdog, aborts). A session holds one, the scope of its
// meetings: a step it abandons fails its ranks still waiting (Communicator::abandon), and what it
// leaves waiting is dropped when it goes. Its participants are in this process: rank 0 of 1.
//
//   auto nccl = std::make_shared<PeerCommunicator>("nccl", meetings, library);  // both the process's
//   nccl->all_reduce({.group = "bucket_0", .instance = 7, .participant = r, .group_size = n,
//                     .device = &gpu}, Reduction::sum, inputs, outputs)->then(done);
#pragma once

#include <string>

#include "runtime/collectives/communicator.h"
#include "runtime/collectives/peer_meetings.h"

namespace mirra::runtime {

class PeerCommunicator final : public Communicator {
 public:
  // `meetings` and `library` outlive it.
  PeerCommunicator(std::string name, PeerMeetings& meetings, PeerLibrary& library)
      : name_(std::move(name)), meetings_(meetings), library_(library) {}
  ~PeerCommunicator() override { meetings_.forget(this); }
  PeerCommunicator(const PeerCommunicator&) = delete;
  PeerCommunicator& operator=(const PeerCommunicator&) = delete;

  std::string_view name() const override { return name_; }
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  void abandon(const CollectiveInstance& which, const graph::Status& why) override { meetings_.abandon(this, which, why); }

 protected:
  void start_all_reduce(const CollectiveCall& call, Reduction reduction, std::span<const Tensor> inputs,
                        std::span<Tensor> outputs, CollectiveDone done) override;
  void start_reduce_scatter(const CollectiveCall& call, Reduction reduction, std::span<const Tensor> inputs,
                            std::span<Tensor> outputs, CollectiveDone done) override;
  void start_all_gather(const CollectiveCall& call, std::span<const Tensor> inputs, std::span<Tensor> outputs,
                        CollectiveDone done) override;

 private:
  // The participant's part (or why there is none) to the meeting of `call`.
  void arrive(std::string_view operation, const CollectiveCall& call, graph::Expected<PeerPart> part, CollectiveDone done);

  const std::string name_;
  PeerMeetings& meetings_;
  PeerLibrary& library_;
};

}  // namespace mirra::runtime
