// GrpcCommunicator: the Transfers service that receives the values other tasks send, checked before
// anything is kept; the stubs that deliver this task's (gRPC's callback API, so no executor thread
// waits); and the rendezvous where a delivered value meets its Recv. A value's bytes are copied once
// on each side (Note [One copy a side]).
#include "runtime/collectives/grpc_communicator.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/wire_format_lite.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/support/proto_buffer_reader.h>

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>
#include <set>

#include "runtime/allocator.h"
#include "runtime/collectives/rendezvous.h"
#include "runtime/collectives/transfers.grpc.pb.h"

namespace mirra::runtime {

// Note [One copy a side]
// A Delivery's data is the tensor's bytes, which protobuf's generated code would copy twice on each
// side: into the message's string and into gRPC's buffer when sending, into the string and out of it
// into a tensor when receiving. So the Deliver method carries raw bytes (gRPC's ByteBuffer) framed
// as the Delivery message itself, which any protobuf client may still send: the sender serialises
// the other fields, then the data field's key and length, into one small slice, and hands gRPC a
// second slice over the tensor's own buffer (kept alive by the slice until gRPC is done with it):
// no copy of the data. The receiver reads the message's fields in whatever order they come,
// reading the data field once into a buffer of its own, which then becomes the tensor's: one copy.

namespace {

using google::protobuf::internal::WireFormatLite;

constexpr int kDataField = 9;  // transfers.proto's Delivery.data
constexpr const char* kDeliverMethod = "/mirra.transfers.Transfers/Deliver";

// One side of a transfer at the rendezvous: side 0 the value delivered, side 1 the Recv.
struct Side {
  Tensor value;
  Tensor* into = nullptr;
  CollectiveDone done;
};

constexpr int kDelivered = 0, kReceiving = 1;

std::string meeting_group(int from_task, std::string_view group) {
  return "task_" + std::to_string(from_task) + "/" + std::string(group);
}

std::string describe(int from_task, std::string_view group, int64_t instance) {
  return "recv '" + std::string(group) + "' (instance " + std::to_string(instance) + ") from task " +
         std::to_string(from_task) + " (side 0: its value, side 1: the Recv)";
}

std::chrono::system_clock::time_point system_deadline(CollectiveClock::time_point deadline) {
  const auto left = deadline - CollectiveClock::now();
  return std::chrono::system_clock::now() + std::chrono::duration_cast<std::chrono::system_clock::duration>(left);
}

// The value a delivery's header describes, over `data` (its bytes), or why it is malformed.
graph::Expected<Tensor> value_of(const transfers::Delivery& delivery, const Tensor& data) {
  if (delivery.dtype() < 0 || delivery.dtype() > static_cast<int>(graph::DType::f16)) {
    return graph::invalid_argument("its dtype " + std::to_string(delivery.dtype()) + " is not one of mirra's");
  }
  const graph::DType dtype = static_cast<graph::DType>(delivery.dtype());
  if (delivery.shape_size() > kMaxRank) {
    return graph::invalid_argument("its rank " + std::to_string(delivery.shape_size()) + " is above " + std::to_string(kMaxRank));
  }
  const int64_t element_size = static_cast<int64_t>(graph::dtype_size(dtype));
  int64_t elements = 1;
  for (int64_t dim : delivery.shape()) {
    if (dim < 0) return graph::invalid_argument("its shape has a negative dimension " + std::to_string(dim));
    if (dim > 0 && elements > std::numeric_limits<int64_t>::max() / element_size / dim) {
      return graph::invalid_argument("its shape holds more bytes than a tensor can");
    }
    elements *= dim;
  }
  if (static_cast<uint64_t>(elements * element_size) != data.byte_size()) {
    return graph::invalid_argument("it carries " + std::to_string(data.byte_size()) + " bytes where its shape asks " +
                                   std::to_string(elements * element_size));
  }
  const TensorShape shape(std::vector<int64_t>(delivery.shape().begin(), delivery.shape().end()));
  if (elements == 0) return Tensor::empty(host_allocator(), dtype, shape);
  return Tensor(dtype, shape, data.buffer());
}

// A delivery as it came off the wire: every field but the data, and the data's bytes.
struct Received {
  transfers::Delivery header;
  Tensor data;  // u8
};

// Reads the Delivery message in `request`: the data field's bytes straight into a buffer of their own
// (the one copy of Note [One copy a side]), every other field, in any order, into the header.
graph::Expected<Received> read_delivery(const grpc::ByteBuffer& request) {
  grpc::ByteBuffer shared(request);  // the same slices
  const size_t length = shared.Length();
  grpc::ProtoBufferReader reader(&shared);
  google::protobuf::io::CodedInputStream in(&reader);
  std::string header_bytes;
  Received received{.data = Tensor::empty(host_allocator(), graph::DType::u8, TensorShape{0})};
  {
    google::protobuf::io::StringOutputStream header_stream(&header_bytes);
    google::protobuf::io::CodedOutputStream header(&header_stream);
    for (uint32_t tag = in.ReadTag(); tag != 0; tag = in.ReadTag()) {
      if (WireFormatLite::GetTagFieldNumber(tag) != kDataField) {
        if (!WireFormatLite::SkipField(&in, tag, &header)) {
          return graph::invalid_argument("its field " + std::to_string(WireFormatLite::GetTagFieldNumber(tag)) + " is cut short");
        }
        continue;
      }
      uint32_t bytes = 0;
      if (WireFormatLite::GetTagWireType(tag) != WireFormatLite::WIRETYPE_LENGTH_DELIMITED || !in.ReadVarint32(&bytes) ||
          bytes > length) {
        return graph::invalid_argument("its data field is not a length-delimited run of its bytes");
      }
      received.data = Tensor::empty(host_allocator(), graph::DType::u8, TensorShape{static_cast<int64_t>(bytes)});
      if (bytes > 0 && !in.ReadRaw(received.data.mutable_raw_data(), static_cast<int>(bytes))) {
        return graph::invalid_argument("its data is cut short");
      }
    }
    if (!in.ConsumedEntireMessage()) return graph::invalid_argument("it is not a Delivery message");
  }
  if (!received.header.ParseFromString(header_bytes)) return graph::invalid_argument("its fields are not a Delivery's");
  return received;
}

// `header` (a Delivery without its data) and `value`'s bytes as the Delivery message: the fields and
// the data's key and length copied into one slice, the data a slice over the value's own buffer,
// which the slice keeps alive until gRPC is done with it (Note [One copy a side]).
grpc::ByteBuffer framed(const transfers::Delivery& header, const Tensor& value) {
  std::string head = header.SerializeAsString();
  {
    google::protobuf::io::StringOutputStream out(&head);
    google::protobuf::io::CodedOutputStream coded(&out);
    coded.WriteTag(WireFormatLite::MakeTag(kDataField, WireFormatLite::WIRETYPE_LENGTH_DELIMITED));
    coded.WriteVarint64(value.byte_size());
  }
  std::vector<grpc::Slice> slices;
  slices.emplace_back(head);
  if (value.byte_size() > 0) {
    auto* kept = new Tensor(value);
    slices.emplace_back(const_cast<void*>(value.raw_data()), value.byte_size(), [](void* tensor) { delete static_cast<Tensor*>(tensor); },
                        kept);
  }
  return grpc::ByteBuffer(slices.data(), slices.size());
}

graph::Status status_of(const grpc::Status& status, const std::string& what) {
  const std::string message = what + ": " + status.error_message();
  switch (status.error_code()) {
    case grpc::StatusCode::DEADLINE_EXCEEDED: return graph::deadline_exceeded(message);
    case grpc::StatusCode::UNAVAILABLE: return graph::unavailable(message);
    case grpc::StatusCode::PERMISSION_DENIED:
    case grpc::StatusCode::INVALID_ARGUMENT: return graph::invalid_argument(message);
    case grpc::StatusCode::FAILED_PRECONDITION: return graph::failed_precondition(message);
    case grpc::StatusCode::CANCELLED: return {graph::StatusCode::cancelled, message};
    default: return graph::unavailable(message);
  }
}

// A value meets its Recv: the Recv takes it.
void transfer(std::vector<Side>& sides) {
  *sides[kReceiving].into = std::move(sides[kDelivered].value);
  sides[kReceiving].done(graph::Status());
  sides[kDelivered].done(graph::Status());
}

// One delivery in flight: what gRPC's callback needs until it is called. Its context holds the
// channel it goes over.
struct Delivering {
  grpc::ClientContext context;
  grpc::ByteBuffer request;
  grpc::ByteBuffer reply;
  std::string what;
  CollectiveDone done;
};

}  // namespace

struct GrpcCommunicator::State final : transfers::Transfers::WithRawCallbackMethod_Deliver<transfers::Transfers::Service> {
  GrpcCluster cluster;
  Rendezvous<Side> meetings{"side"};
  std::unique_ptr<grpc::Server> server;
  std::mutex mutex;
  std::map<int, std::unique_ptr<grpc::GenericStub>> stubs;  // by task, made on first use
  std::set<int> refused_tasks;                                      // those refused so far (said once each)
  std::atomic<int64_t> sent{0}, received{0};
  // The deliveries whose callbacks have not finished. The communicator's end cancels them (one to
  // a task that never came, without a deadline, would wait for ever) and ends only after the last
  // callback has returned, so none runs on a gRPC thread after the communicator, with the channels
  // it goes over, is gone.
  std::map<Delivering*, std::shared_ptr<Delivering>> in_flight;  // under `mutex`
  std::condition_variable landed;

  void take_off(std::shared_ptr<Delivering> flight) {
    std::lock_guard lock(mutex);
    in_flight.emplace(flight.get(), std::move(flight));
  }

  // A delivery's callback: its done, then it leaves the flights (its context, and the context's
  // hold on the channel, go here unless cancel_deliveries holds them); nothing of the communicator
  // is touched after.
  void land(Delivering* flight, const grpc::Status& status) {
    flight->done(status.ok() ? graph::Status() : status_of(status, flight->what));
    std::lock_guard lock(mutex);
    in_flight.erase(flight);
    landed.notify_all();
  }

  // Cancels the deliveries in flight and waits until their callbacks are over.
  void cancel_deliveries() {
    std::vector<std::shared_ptr<Delivering>> flights;
    {
      std::lock_guard lock(mutex);
      for (const auto& entry : in_flight) flights.push_back(entry.second);
    }
    for (const std::shared_ptr<Delivering>& flight : flights) flight->context.TryCancel();
    flights.clear();
    std::unique_lock lock(mutex);
    landed.wait(lock, [&] { return in_flight.empty(); });
  }

  int tasks() const { return static_cast<int>(cluster.addresses.size()); }

  grpc::GenericStub& stub(int task) {
    std::lock_guard lock(mutex);
    std::unique_ptr<grpc::GenericStub>& stub = stubs[task];
    if (!stub) {
      stub = std::make_unique<grpc::GenericStub>(
          grpc::CreateChannel(cluster.addresses[static_cast<size_t>(task)], grpc::InsecureChannelCredentials()));
    }
    return *stub;
  }

  // Refuses `delivery` with `why`, said here too (once per sending task); its Recv here fails with
  // it, at once, instead of at its deadline.
  grpc::Status refuse(const transfers::Delivery& delivery, grpc::StatusCode code, const std::string& why) {
    const int from = delivery.from_task();
    const std::string message = "task " + std::to_string(cluster.task) + " refused a transfer from task " +
                                std::to_string(from) + ": " + why;
    bool first = false;
    {
      std::lock_guard lock(mutex);
      first = refused_tasks.insert(from).second;
    }
    if (first) std::fprintf(stderr, "mirra: %s\n", message.c_str());
    meetings.abandon({nullptr, meeting_group(from, delivery.group()), delivery.instance()}, graph::invalid_argument(message));
    return {code, message};
  }

  grpc::ServerUnaryReactor* Deliver(grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
                                    grpc::ByteBuffer* reply) override {
    grpc::Slice nothing;  // transfers.Delivered, which has no fields
    *reply = grpc::ByteBuffer(&nothing, 1);
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(deliver(*request));
    return reactor;
  }

  // Checks a delivery and has its value meet its Recv.
  grpc::Status deliver(const grpc::ByteBuffer& request) {
    auto arrived = read_delivery(request);
    if (!arrived.ok()) {
      return {grpc::StatusCode::INVALID_ARGUMENT,
              "task " + std::to_string(cluster.task) + " refused a malformed transfer: " + arrived.status().message()};
    }
    const transfers::Delivery* delivery = &arrived->header;
    const int from = delivery->from_task();
    if (delivery->token() != cluster.token) return refuse(*delivery, grpc::StatusCode::PERMISSION_DENIED, "the cluster token differs");
    if (from < 0 || from >= tasks() || from == cluster.task) {
      return refuse(*delivery, grpc::StatusCode::PERMISSION_DENIED,
                    "it is not another task of this cluster of " + std::to_string(tasks()));
    }
    if (delivery->to_task() != cluster.task) {
      return refuse(*delivery, grpc::StatusCode::INVALID_ARGUMENT, "it was sent to task " + std::to_string(delivery->to_task()));
    }
    if (delivery->fingerprint() != cluster.fingerprint) {
      return refuse(*delivery, grpc::StatusCode::FAILED_PRECONDITION,
                    "it runs another program (its fingerprint " + delivery->fingerprint() + ", this task's " +
                        cluster.fingerprint + ")");
    }
    auto value = value_of(*delivery, arrived->data);
    if (!value.ok()) {
      return refuse(*delivery, grpc::StatusCode::INVALID_ARGUMENT,
                    "its value for '" + delivery->group() + "' is malformed: " + value.status().message());
    }
    received += static_cast<int64_t>(arrived->data.byte_size());
    const auto deadline = deadline_after(std::chrono::milliseconds(delivery->timeout_ms()));
    auto sides = meetings.arrive({nullptr, meeting_group(from, delivery->group()), delivery->instance()},
                                 describe(from, delivery->group(), delivery->instance()), kDelivered, 2, deadline,
                                 Side{std::move(*value), nullptr, [](const graph::Status&) {}});
    if (sides) transfer(*sides);
    return grpc::Status::OK;
  }
};

graph::Expected<std::shared_ptr<GrpcCommunicator>> GrpcCommunicator::start(const GrpcCluster& cluster) {
  if (cluster.task < 0 || cluster.task >= static_cast<int>(cluster.addresses.size())) {
    return graph::invalid_argument("task " + std::to_string(cluster.task) + " is not in the cluster of " +
                                   std::to_string(cluster.addresses.size()) + " tasks");
  }
  auto state = std::make_unique<State>();
  state->cluster = cluster;
  const std::string& address = cluster.addresses[static_cast<size_t>(cluster.task)];
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &port);
  builder.SetMaxReceiveMessageSize(std::numeric_limits<int>::max());
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);  // a port another process serves on is taken
  builder.RegisterService(state.get());
  state->server = builder.BuildAndStart();
  if (!state->server || port == 0) {
    return graph::unavailable("task " + std::to_string(cluster.task) + " cannot listen on '" + address + "' (taken, or not an address of this host)");
  }
  return std::shared_ptr<GrpcCommunicator>(new GrpcCommunicator(std::move(state)));
}

GrpcCommunicator::GrpcCommunicator(std::unique_ptr<State> state) : state_(std::move(state)) {}

GrpcCommunicator::~GrpcCommunicator() {
  state_->server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  state_->cancel_deliveries();
}

int GrpcCommunicator::rank() const { return state_->cluster.task; }
int GrpcCommunicator::world_size() const { return state_->tasks(); }
int64_t GrpcCommunicator::bytes_sent() const { return state_->sent; }
int64_t GrpcCommunicator::bytes_received() const { return state_->received; }

void GrpcCommunicator::abandon(const CollectiveInstance& which, const graph::Status& why) {
  for (int task = 0; task < state_->tasks(); ++task) {
    if (task != state_->cluster.task) state_->meetings.abandon({nullptr, meeting_group(task, which.group), which.instance}, why);
  }
}

void GrpcCommunicator::start_send(const CollectiveCall& call, const Tensor& value, CollectiveDone done) {
  State& s = *state_;
  const std::string what = "send '" + call.group + "' (instance " + std::to_string(call.instance) + ") to task " +
                           std::to_string(call.peer);
  if (call.peer < 0 || call.peer >= s.tasks() || call.peer == s.cluster.task) {
    return done(graph::invalid_argument(what + ": not another task of this cluster of " + std::to_string(s.tasks())));
  }
  auto delivering = std::make_shared<Delivering>();
  delivering->what = what + " at " + s.cluster.addresses[static_cast<size_t>(call.peer)];
  delivering->done = std::move(done);
  transfers::Delivery request;
  request.set_token(s.cluster.token);
  request.set_fingerprint(s.cluster.fingerprint);
  request.set_from_task(s.cluster.task);
  request.set_to_task(call.peer);
  request.set_group(call.group);
  request.set_instance(call.instance);
  request.set_dtype(static_cast<int>(value.dtype()));
  for (int64_t dim : value.shape().dims()) request.add_shape(dim);
  s.sent += static_cast<int64_t>(value.byte_size());
  delivering->context.set_wait_for_ready(true);  // a task that has not started yet: wait for it, until the deadline
  if (call.deadline != CollectiveClock::time_point::max()) {
    delivering->context.set_deadline(system_deadline(call.deadline));
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(call.deadline - CollectiveClock::now());
    request.set_timeout_ms(std::max<int64_t>(1, left.count()));
  }
  delivering->request = framed(request, value);
  Delivering* flight = delivering.get();
  s.take_off(std::move(delivering));
  s.stub(call.peer).UnaryCall(&flight->context, kDeliverMethod, grpc::StubOptions(), &flight->request, &flight->reply,
                              [&s, flight](grpc::Status status) { s.land(flight, status); });
}

void GrpcCommunicator::start_recv(const CollectiveCall& call, Tensor& value, CollectiveDone done) {
  State& s = *state_;
  if (call.peer < 0 || call.peer >= s.tasks() || call.peer == s.cluster.task) {
    return done(graph::invalid_argument(describe(call.peer, call.group, call.instance) + ": not another task of this cluster of " +
                                        std::to_string(s.tasks())));
  }
  auto sides = s.meetings.arrive({nullptr, meeting_group(call.peer, call.group), call.instance},
                                 describe(call.peer, call.group, call.instance), kReceiving, 2, call.deadline,
                                 Side{Tensor(), &value, std::move(done)});
  if (sides) transfer(*sides);
}

}  // namespace mirra::runtime
