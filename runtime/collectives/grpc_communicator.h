// GrpcCommunicator: send and receive between the tasks of a cluster (the parameter-server strategy's
// servers and workers, each a process) over gRPC, where a process that dies must not end the others
// as it ends an MPI job. Every task serves on its address of the cluster spec, and only there; a
// send delivers the value to the receiving task, where it waits for the Recv of its transfer group
// and instance (a Rendezvous of two, which names what did not arrive at the deadline). Each delivery
// carries the cluster's token and the fingerprint of the sender's program: a task refuses one with
// another token, another fingerprint or from a task outside the cluster, the sender's Send fails
// with the receiver's reason, and the Recv it was for fails at once with it there.
// A value's bytes are copied once on each side: the sender hands gRPC a slice of the tensor's own
// buffer, the receiver reads them once into the buffer that becomes the Recv's tensor.
// Collectives other than send and receive are not offered (Communicator's "not supported"). Its end
// cancels the deliveries still in flight (their sends fail as cancelled) and waits for their
// callbacks, so no gRPC work of it outlives it.
//
//   auto transfers = runtime::GrpcCommunicator::start({.addresses = {"localhost:7000", "localhost:7001"},
//                                                       .task = 1, .token = "s3cret", .fingerprint = hash});
//   session options: .communicators = {*transfers}, .task = 1
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "runtime/collectives/communicator.h"

namespace mirra::runtime {

struct GrpcCluster {
  std::vector<std::string> addresses;  // by task: "host:port"
  int task = 0;                        // this process's
  std::string token;                   // shared by every task; "" for none
  std::string fingerprint;             // of the program every task runs a part of
};

class GrpcCommunicator : public Communicator {
 public:
  // Serves on this task's address. Errors: a task outside the cluster, an address it cannot listen on.
  static graph::Expected<std::shared_ptr<GrpcCommunicator>> start(const GrpcCluster& cluster);
  ~GrpcCommunicator() override;

  std::string_view name() const override { return "grpc"; }
  int rank() const override;
  int world_size() const override;
  void abandon(const CollectiveInstance& which, const graph::Status& why) override;

  // How many bytes of tensor data this task sent and received so far.
  int64_t bytes_sent() const;
  int64_t bytes_received() const;

  struct State;

 protected:
  void start_send(const CollectiveCall& call, const Tensor& value, CollectiveDone done) override;
  void start_recv(const CollectiveCall& call, Tensor& value, CollectiveDone done) override;

 private:
  explicit GrpcCommunicator(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace mirra::runtime
