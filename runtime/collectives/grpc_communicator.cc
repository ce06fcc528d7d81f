// GrpcCommunicator: the Transfers service that receives the values other tasks send, checked before
// anything is kept; the stubs that deliver this task's (gRPC's callback API, so no executor thread
// waits); and the rendezvous where a delivered value meets its Recv.
#include "runtime/collectives/grpc_communicator.h"

#include <grpcpp/grpcpp.h>

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

namespace {

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

// The value a delivery carries, or why it is malformed.
graph::Expected<Tensor> value_of(const transfers::Delivery& delivery) {
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
  if (static_cast<uint64_t>(elements * element_size) != delivery.data().size()) {
    return graph::invalid_argument("it carries " + std::to_string(delivery.data().size()) + " bytes where its shape asks " +
                                   std::to_string(elements * element_size));
  }
  Tensor value = Tensor::empty(host_allocator(), dtype, TensorShape(std::vector<int64_t>(delivery.shape().begin(), delivery.shape().end())));
  if (!delivery.data().empty()) std::memcpy(value.mutable_raw_data(), delivery.data().data(), delivery.data().size());
  return value;
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
  transfers::Delivery request;
  transfers::Delivered reply;
  std::string what;
  CollectiveDone done;
};

}  // namespace

struct GrpcCommunicator::State final : transfers::Transfers::Service {
  GrpcCluster cluster;
  Rendezvous<Side> meetings{"side"};
  std::unique_ptr<grpc::Server> server;
  std::mutex mutex;
  std::map<int, std::unique_ptr<transfers::Transfers::Stub>> stubs;  // by task, made on first use
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

  transfers::Transfers::Stub& stub(int task) {
    std::lock_guard lock(mutex);
    std::unique_ptr<transfers::Transfers::Stub>& stub = stubs[task];
    if (!stub) {
      stub = transfers::Transfers::NewStub(
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

  grpc::Status Deliver(grpc::ServerContext*, const transfers::Delivery* delivery, transfers::Delivered*) override {
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
    auto value = value_of(*delivery);
    if (!value.ok()) {
      return refuse(*delivery, grpc::StatusCode::INVALID_ARGUMENT,
                    "its value for '" + delivery->group() + "' is malformed: " + value.status().message());
    }
    received += static_cast<int64_t>(delivery->data().size());
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
  transfers::Delivery& request = delivering->request;
  request.set_token(s.cluster.token);
  request.set_fingerprint(s.cluster.fingerprint);
  request.set_from_task(s.cluster.task);
  request.set_to_task(call.peer);
  request.set_group(call.group);
  request.set_instance(call.instance);
  request.set_dtype(static_cast<int>(value.dtype()));
  for (int64_t dim : value.shape().dims()) request.add_shape(dim);
  request.set_data(value.raw_data(), value.byte_size());
  s.sent += static_cast<int64_t>(value.byte_size());
  delivering->context.set_wait_for_ready(true);  // a task that has not started yet: wait for it, until the deadline
  if (call.deadline != CollectiveClock::time_point::max()) {
    delivering->context.set_deadline(system_deadline(call.deadline));
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(call.deadline - CollectiveClock::now());
    request.set_timeout_ms(std::max<int64_t>(1, left.count()));
  }
  Delivering* flight = delivering.get();
  s.take_off(std::move(delivering));
  s.stub(call.peer).async()->Deliver(&flight->context, &flight->request, &flight->reply,
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
