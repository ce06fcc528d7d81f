// GrpcCommunicator between tasks of one process on localhost ports: every dtype crosses bit for bit,
// whether the Send or the Recv comes first; a Recv whose value never comes fails at its deadline
// naming the missing side; a task with another token or another program is refused on both sides,
// naming why; a delivery's timeout past the clock's end is none; a communicator's end cancels the
// deliveries it still has in flight; a delivery is read whatever the order of its fields; malformed
// deliveries (a dtype mirra
// lacks, bytes that do not fill the shape, negative or huge dimensions, bytes that are no message at
// all) are refused and the task goes on receiving; an address it cannot listen on is an error naming
// it; collectives it does not offer say so.
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <doctest/doctest.h>

#include <cstring>
#include <future>
#include <limits>
#include <thread>

#include "runtime/collectives/grpc_communicator.h"
#include "runtime/random.h"
#include "tests/local_addresses.h"
#include "tests/protobuf_wire.h"

namespace mirra::runtime {
namespace {

using test::bytes_field;
using test::number_field;

std::vector<std::string> free_addresses(int n) {
  std::vector<std::string> addresses = test::free_local_addresses(n);
  REQUIRE(addresses.size() == static_cast<size_t>(n));
  return addresses;
}

std::shared_ptr<GrpcCommunicator> start(const std::vector<std::string>& addresses, int task, std::string token = "t0k3n",
                                        std::string fingerprint = "program-a") {
  auto communicator = GrpcCommunicator::start({.addresses = addresses, .task = task, .token = token, .fingerprint = fingerprint});
  REQUIRE_MESSAGE(communicator.ok(), communicator.status().to_string());
  return *communicator;
}

CollectiveCall transfer(const std::string& group, int64_t instance, int participant, int peer, double seconds = 20) {
  return {.group = group, .instance = instance, .participant = participant, .group_size = 2, .peer = peer,
          .deadline = deadline_after(std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000)))};
}

graph::Status sent(GrpcCommunicator& from, const CollectiveCall& call, const Tensor& value) {
  return from.send(call, value)->wait();
}

TEST_CASE("GrpcCommunicator.every_dtype_crosses_bit_for_bit_whichever_side_comes_first") {
  const auto addresses = free_addresses(2);
  auto sender = start(addresses, 0);
  auto receiver = start(addresses, 1);
  CHECK(sender->name() == "grpc");
  CHECK(receiver->rank() == 1);
  CHECK(receiver->world_size() == 2);
  Random rng(5);
  std::vector<uint8_t> bytes(4 * 3 * 8);
  for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng.below(256));
  int64_t instance = 0;
  for (graph::DType dtype : {graph::DType::f32, graph::DType::f64, graph::DType::i32, graph::DType::i64, graph::DType::u8,
                             graph::DType::boolean, graph::DType::bf16, graph::DType::f16}) {
    CAPTURE(graph::dtype_name(dtype));
    Tensor value = Tensor::empty(host_allocator(), dtype, {4, 3});
    std::memcpy(value.mutable_raw_data(), bytes.data(), value.byte_size());
    if (dtype == graph::DType::boolean) {  // only 0 and 1 are booleans
      for (size_t i = 0; i < value.byte_size(); ++i) static_cast<uint8_t*>(value.mutable_raw_data())[i] = bytes[i] & 1;
    }
    for (bool send_first : {true, false}) {
      Tensor received;
      std::shared_ptr<Work> receiving;
      if (!send_first) receiving = receiver->recv(transfer("g", instance, 1, 0), received);
      REQUIRE(sent(*sender, transfer("g", instance, 0, 1), value).ok());
      if (send_first) receiving = receiver->recv(transfer("g", instance, 1, 0), received);
      const graph::Status status = receiving->wait();
      REQUIRE_MESSAGE(status.ok(), status.to_string());
      REQUIRE(received.dtype() == dtype);
      REQUIRE(received.shape().to_vector() == std::vector<int64_t>{4, 3});
      CHECK(std::memcmp(received.raw_data(), value.raw_data(), value.byte_size()) == 0);
      ++instance;
    }
  }
  Tensor empty = Tensor::empty(host_allocator(), graph::DType::f32, {0, 5});
  Tensor received;
  REQUIRE(sent(*sender, transfer("empty", 0, 0, 1), empty).ok());
  REQUIRE(receiver->recv(transfer("empty", 0, 1, 0), received)->wait().ok());
  CHECK(received.shape().to_vector() == std::vector<int64_t>{0, 5});
  CHECK(sender->bytes_sent() == receiver->bytes_received());
  CHECK(sender->bytes_sent() > 0);
}

TEST_CASE("GrpcCommunicator.a_recv_whose_value_never_comes_fails_at_its_deadline") {
  const auto addresses = free_addresses(2);
  auto receiver = start(addresses, 1);
  Tensor received;
  const graph::Status status = receiver->recv(transfer("lonely", 3, 1, 0, 0.2), received)->wait();
  REQUIRE(status.code() == graph::StatusCode::deadline_exceeded);
  CHECK(status.message().find("recv 'lonely' (instance 3) from task 0") != std::string::npos);
  CHECK(status.message().find("side 0 of 2 did not arrive") != std::string::npos);
  // A task that never started: the Send waits for it until its deadline.
  auto sender = start(addresses, 0);
  const auto three = free_addresses(3);
  auto alone = start(three, 0);
  const graph::Status unanswered = sent(*alone, transfer("g", 0, 0, 2, 0.3), Tensor::scalar(1.0f));
  CHECK(unanswered.code() == graph::StatusCode::deadline_exceeded);
  CHECK(unanswered.message().find("send 'g' (instance 0) to task 2 at " + three[2]) != std::string::npos);
}

TEST_CASE("GrpcCommunicator.another_token_or_program_is_refused_on_both_sides") {
  const auto addresses = free_addresses(2);
  auto receiver = start(addresses, 1, "right");
  {
    auto intruder = start(addresses, 0, "wrong");
    const graph::Status refused = sent(*intruder, transfer("g", 0, 0, 1), Tensor::scalar(1.0f));
    REQUIRE_FALSE(refused.ok());
    CHECK(refused.message().find("task 1 refused a transfer from task 0: the cluster token differs") != std::string::npos);
    Tensor received;
    const graph::Status there = receiver->recv(transfer("g", 0, 1, 0), received)->wait();
    CHECK(there.message().find("the cluster token differs") != std::string::npos);
  }
  auto other_receiver_addresses = free_addresses(2);
  auto checked = start(other_receiver_addresses, 1, "same", "program-a");
  auto other = start(other_receiver_addresses, 0, "same", "program-b");
  const graph::Status refused = sent(*other, transfer("g", 0, 0, 1), Tensor::scalar(1.0f));
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.code() == graph::StatusCode::failed_precondition);
  CHECK(refused.message().find("it runs another program (its fingerprint program-b, this task's program-a)") != std::string::npos);
}

// A Delivery from task 0 to task 1 with the right token and fingerprint, and `rest`.
std::string delivery(const std::string& rest) { return test::delivery("t0k3n", "program-a", rest); }

grpc::Status deliver_raw(const std::string& address, const std::string& message) {
  grpc::GenericStub stub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  grpc::Slice slice(message);
  grpc::ByteBuffer request(&slice, 1), response;
  grpc::ClientContext context;
  std::promise<grpc::Status> done;
  stub.UnaryCall(&context, "/mirra.transfers.Transfers/Deliver", grpc::StubOptions(), &request, &response,
                 [&](grpc::Status status) { done.set_value(status); });
  return done.get_future().get();
}

TEST_CASE("GrpcCommunicator.malformed_deliveries_are_refused_and_the_task_goes_on") {
  const auto addresses = free_addresses(2);
  auto receiver = start(addresses, 1);
  const std::string f32 = number_field(7, 0);
  std::string nine_ones;
  for (int i = 0; i < 9; ++i) nine_ones += number_field(8, 1);
  struct Bad {
    std::string message, why;
  };
  const std::vector<Bad> bad = {
      {delivery(number_field(7, 99)), "its dtype 99 is not one of mirra's"},
      {delivery(f32 + number_field(8, 2) + bytes_field(9, "abc")), "it carries 3 bytes where its shape asks 8"},
      {delivery(f32 + number_field(8, -4)), "its shape has a negative dimension -4"},
      {delivery(f32 + number_field(8, int64_t{1} << 40) + number_field(8, int64_t{1} << 40)), "its shape holds more bytes than a tensor can"},
      {delivery(f32 + nine_ones), "its rank 9 is above 8"},
  };
  for (const Bad& b : bad) {
    const grpc::Status status = deliver_raw(addresses[1], b.message);
    CHECK_FALSE(status.ok());
    CHECK_MESSAGE(status.error_message().find(b.why) != std::string::npos, status.error_message());
  }
  // Not a message at all: gRPC cannot parse it.
  CHECK_FALSE(deliver_raw(addresses[1], std::string("\xff\xff\xff\xff\x0f garbage", 14)).ok());
  // The task goes on receiving from a well-formed sender.
  auto sender = GrpcCommunicator::start({.addresses = addresses, .task = 0, .token = "t0k3n", .fingerprint = "program-a"});
  REQUIRE(sender.ok());
  Tensor received;
  REQUIRE(sent(**sender, transfer("after", 0, 0, 1), Tensor::scalar(7.0f)).ok());
  REQUIRE(receiver->recv(transfer("after", 0, 1, 0), received)->wait().ok());
  CHECK(received.values<float>()[0] == 7.0f);
}

// The receiver reads the Delivery message field by field (its data straight into the tensor's
// buffer): a sender may put the data first, or twice (protobuf's last one wins), and fields it does
// not know are skipped.
TEST_CASE("GrpcCommunicator.a_delivery_is_read_whatever_the_order_of_its_fields") {
  const auto addresses = free_addresses(2);
  auto receiver = start(addresses, 1);
  const float values[2] = {1.5f, -2.25f}, others[2] = {9.0f, 9.0f};
  const std::string data(reinterpret_cast<const char*>(values), sizeof(values));
  const std::string stale(reinterpret_cast<const char*>(others), sizeof(others));
  const std::string shape = number_field(7, 0) + number_field(8, 2);  // f32 [2]
  const std::vector<std::string> messages = {
      bytes_field(9, data) + delivery(number_field(6, 0) + shape),
      delivery(bytes_field(9, stale) + number_field(6, 1) + shape + bytes_field(9, data)),
      delivery(number_field(6, 2) + number_field(15, 77) + bytes_field(16, "unknown") + shape + bytes_field(9, data)),
  };
  for (int64_t instance = 0; instance < static_cast<int64_t>(messages.size()); ++instance) {
    CAPTURE(instance);
    const grpc::Status status = deliver_raw(addresses[1], messages[static_cast<size_t>(instance)]);
    REQUIRE_MESSAGE(status.ok(), status.error_message());
    Tensor received;
    REQUIRE(receiver->recv(transfer("g", instance, 1, 0), received)->wait().ok());
    REQUIRE(received.num_elements() == 2);
    CHECK(received.values<float>()[0] == 1.5f);
    CHECK(received.values<float>()[1] == -2.25f);
  }
  // A data field whose length runs past the message is refused, before anything is allocated for it.
  const grpc::Status cut = deliver_raw(addresses[1], delivery(number_field(6, 9) + shape) + "\x4a\xff\xff\xff\x7f");
  CHECK_FALSE(cut.ok());
  CHECK_MESSAGE(cut.error_message().find("its data field is not a length-delimited run of its bytes") != std::string::npos,
                cut.error_message());
}

TEST_CASE("GrpcCommunicator.a_delivery_may_wait_past_the_clocks_end") {
  // A timeout beyond what the clock can count (the largest int64 milliseconds) is no timeout: the
  // value waits for its Recv instead of overflowing the deadline.
  const auto addresses = free_addresses(2);
  auto receiver = start(addresses, 1);
  const std::string value = number_field(7, 0) + bytes_field(9, std::string(4, '\0'));
  for (const int64_t timeout_ms : {std::numeric_limits<int64_t>::max(), int64_t{1} << 62, int64_t{-5}}) {
    CHECK(deliver_raw(addresses[1], delivery(number_field(6, timeout_ms & 0xff) + value + number_field(10, timeout_ms))).ok());
    Tensor received;
    REQUIRE(receiver->recv(transfer("g", timeout_ms & 0xff, 1, 0), received)->wait().ok());
    CHECK(received.values<float>()[0] == 0.0f);
  }
}

TEST_CASE("GrpcCommunicator.its_end_cancels_the_deliveries_in_flight") {
  // A send without a deadline to a task that never starts waits for it; the communicator's end
  // cancels it, and its done hears so, before the communicator is gone (no gRPC callback outlives it).
  const auto three = free_addresses(3);
  auto alone = start(three, 0);
  CollectiveCall call = transfer("g", 0, 0, 2);
  call.deadline = CollectiveClock::time_point::max();
  const std::shared_ptr<Work> sending = alone->send(call, Tensor::scalar(1.0f));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  CHECK_FALSE(sending->done());
  alone.reset();
  const graph::Status status = sending->wait(deadline_after(std::chrono::seconds(10)));
  CHECK(status.code() == graph::StatusCode::cancelled);
  CHECK_MESSAGE(status.message().find("send 'g' (instance 0) to task 2 at " + three[2]) != std::string::npos, status.to_string());
}

TEST_CASE("GrpcCommunicator.says_what_it_cannot_do") {
  const auto addresses = free_addresses(2);
  auto first = start(addresses, 0);
  auto taken = GrpcCommunicator::start({.addresses = addresses, .task = 0});
  REQUIRE_FALSE(taken.ok());
  CHECK(taken.status().message().find("task 0 cannot listen on '" + addresses[0] + "'") != std::string::npos);
  auto outside = GrpcCommunicator::start({.addresses = addresses, .task = 2});
  REQUIRE_FALSE(outside.ok());
  CHECK(outside.status().message().find("task 2 is not in the cluster of 2 tasks") != std::string::npos);
  Tensor value = Tensor::scalar(1.0f);
  const graph::Status all_reduce =
      first->all_reduce({.group = "g", .group_size = 2}, Reduction::sum, {&value, 1}, {&value, 1})->wait();
  CHECK(all_reduce.code() == graph::StatusCode::unimplemented);
  CHECK(all_reduce.message().find("not supported by grpc") != std::string::npos);
  const graph::Status to_itself = sent(*first, transfer("g", 0, 0, 0), value);
  CHECK(to_itself.message().find("not another task of this cluster of 2") != std::string::npos);
}

}  // namespace
}  // namespace mirra::runtime
