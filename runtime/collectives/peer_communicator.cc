// PeerCommunicator: a peer library's parts, met through PeerMeetings.
#include "runtime/collectives/peer_communicator.h"

namespace mirra::runtime {

void PeerCommunicator::start_all_reduce(const CollectiveCall& call, Reduction reduction, std::span<const Tensor> inputs,
                                        std::span<Tensor> outputs, CollectiveDone done) {
  arrive("all_reduce", call, library_.all_reduce(call, reduction, inputs, outputs), std::move(done));
}

void PeerCommunicator::start_reduce_scatter(const CollectiveCall& call, Reduction reduction, std::span<const Tensor> inputs,
                                            std::span<Tensor> outputs, CollectiveDone done) {
  arrive("reduce_scatter", call, library_.reduce_scatter(call, reduction, inputs, outputs), std::move(done));
}

void PeerCommunicator::start_all_gather(const CollectiveCall& call, std::span<const Tensor> inputs, std::span<Tensor> outputs,
                                        CollectiveDone done) {
  arrive("all_gather", call, library_.all_gather(call, inputs, outputs), std::move(done));
}

void PeerCommunicator::arrive(std::string_view operation, const CollectiveCall& call, graph::Expected<PeerPart> part,
                              CollectiveDone done) {
  if (!part.ok()) {  // the other participants fail with it now, instead of at their deadline
    meetings_.abandon(this, {call.group, call.instance}, part.status());
    return done(part.status());
  }
  part->deadline = call.deadline;
  part->done = std::move(done);
  meetings_.arrive(this, operation, call.group, call.instance, call.participant, call.group_size, std::move(*part));
}

}  // namespace mirra::runtime
