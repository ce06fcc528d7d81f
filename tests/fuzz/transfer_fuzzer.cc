// libFuzzer target: arbitrary bytes as a delivery to a task of a parameter-server cluster
// (runtime::GrpcCommunicator's Transfers service, called raw over gRPC on a localhost port). Whatever
// the bytes, the task answers (accepted or refused with a reason) and never crashes; a value it
// accepts waits for its Recv, and the task is started afresh every few hundred inputs so that those
// never taken do not pile up.
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <memory>
#include <string>

#include "runtime/collectives/grpc_communicator.h"
#include "tests/local_addresses.h"

namespace {

struct Task {
  std::shared_ptr<mirra::runtime::GrpcCommunicator> receiver;
  std::unique_ptr<grpc::GenericStub> stub;
};

// Task 1 of a cluster of 2, with no token and no fingerprint, so that a message that parses reaches
// the checks of its value.
Task start_task() {
  const std::vector<std::string> addresses = mirra::test::free_local_addresses(2);
  if (addresses.empty()) std::abort();
  auto receiver = mirra::runtime::GrpcCommunicator::start({.addresses = addresses, .task = 1});
  if (!receiver.ok()) {
    std::fprintf(stderr, "transfer_fuzzer: %s\n", receiver.status().to_string().c_str());
    std::abort();
  }
  return {*receiver, std::make_unique<grpc::GenericStub>(grpc::CreateChannel(addresses[1], grpc::InsecureChannelCredentials()))};
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Task task = start_task();
  static int inputs = 0;
  if (++inputs % 256 == 0) task = start_task();
  grpc::Slice slice(data, size);
  grpc::ByteBuffer request(&slice, 1), response;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  std::promise<grpc::Status> done;
  task.stub->UnaryCall(&context, "/mirra.transfers.Transfers/Deliver", grpc::StubOptions(), &request, &response,
                       [&](grpc::Status status) { done.set_value(status); });
  const grpc::Status status = done.get_future().get();
  // A task that went away (crashed) answers UNAVAILABLE; a deadline means it hangs.
  if (status.error_code() == grpc::StatusCode::UNAVAILABLE || status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
    std::fprintf(stderr, "transfer_fuzzer: the task did not answer: %s\n", status.error_message().c_str());
    std::abort();
  }
  return 0;
}
