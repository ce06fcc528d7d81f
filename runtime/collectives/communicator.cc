// deadline_after, worker_share, Work, the calls' Work and the operations an implementation does not
// offer, the rendezvous's participant lists and the CommunicatorSet table with its observers of
// abandoned steps.
#include "runtime/collectives/communicator.h"

#include "runtime/collectives/rendezvous.h"

namespace mirra::runtime {

CollectiveClock::time_point deadline_after(std::chrono::milliseconds timeout) {
  if (timeout.count() <= 0) return CollectiveClock::time_point::max();
  const auto now = CollectiveClock::now();
  // Compared in milliseconds: converting a huge timeout to the clock's nanoseconds would overflow.
  if (timeout >= std::chrono::duration_cast<std::chrono::milliseconds>(CollectiveClock::time_point::max() - now)) {
    return CollectiveClock::time_point::max();
  }
  return now + timeout;
}

ShareRange worker_share(int64_t count, int64_t group_size, int64_t p, int64_t workers, int64_t w) {
  int64_t first = 0;
  for (int64_t q = 0; q < p; ++q) first += participant_share(count, group_size, q);
  const int64_t share = participant_share(count, group_size, p);
  for (int64_t v = 0; v < w; ++v) first += participant_share(share, workers, v);
  return {first, participant_share(share, workers, w)};
}

std::string Work::what() const {
  return std::string(operation_) + " '" + which_.group + "' (instance " + std::to_string(which_.instance) + ")";
}

bool Work::done() const {
  const std::lock_guard lock(mutex_);
  return done_;
}

graph::Status Work::status() const {
  const std::lock_guard lock(mutex_);
  return done_ ? status_ : graph::unavailable(what() + " has not finished");
}

graph::Status Work::wait(CollectiveClock::time_point deadline) {
  std::unique_lock lock(mutex_);
  if (!finished_.wait_until(lock, deadline, [this] { return done_; })) {
    return graph::deadline_exceeded(what() + " did not finish by the deadline it was waited for");
  }
  return status_;
}

void Work::then(CollectiveDone callback) {
  {
    const std::lock_guard lock(mutex_);
    if (!done_) {
      callbacks_.push_back(std::move(callback));
      return;
    }
  }
  callback(status());
}

void Work::abort(const graph::Status& why) {
  Communicator* communicator = nullptr;
  {
    const std::lock_guard lock(mutex_);
    if (done_) return;
    communicator = communicator_;
  }
  communicator->abandon(which_, why);
}

void Work::complete(graph::Status status) {
  std::vector<CollectiveDone> callbacks;
  {
    const std::lock_guard lock(mutex_);
    if (done_) return;
    done_ = true;
    status_ = std::move(status);
    callbacks.swap(callbacks_);
    communicator_ = nullptr;
  }
  finished_.notify_all();
  for (CollectiveDone& callback : callbacks) callback(status_);
}

std::pair<std::shared_ptr<Work>, CollectiveDone> Communicator::begin(std::string_view operation, const CollectiveCall& call) {
  auto work = std::make_shared<Work>(operation, CollectiveInstance{call.group, call.instance}, this);
  return {work, [work](graph::Status status) { work->complete(std::move(status)); }};
}

std::shared_ptr<Work> Communicator::all_reduce(const CollectiveCall& call, Reduction reduction, std::span<const Tensor> inputs,
                                               std::span<Tensor> outputs) {
  auto [work, done] = begin("all_reduce", call);
  start_all_reduce(call, reduction, inputs, outputs, std::move(done));
  return work;
}

std::shared_ptr<Work> Communicator::reduce_scatter(const CollectiveCall& call, Reduction reduction,
                                                   std::span<const Tensor> inputs, std::span<Tensor> outputs) {
  auto [work, done] = begin("reduce_scatter", call);
  start_reduce_scatter(call, reduction, inputs, outputs, std::move(done));
  return work;
}

std::shared_ptr<Work> Communicator::all_gather(const CollectiveCall& call, std::span<const Tensor> inputs,
                                               std::span<Tensor> outputs) {
  auto [work, done] = begin("all_gather", call);
  start_all_gather(call, inputs, outputs, std::move(done));
  return work;
}

std::shared_ptr<Work> Communicator::broadcast(const CollectiveCall& call, int root, Tensor& buffer) {
  auto [work, done] = begin("broadcast", call);
  start_broadcast(call, root, buffer, std::move(done));
  return work;
}

std::shared_ptr<Work> Communicator::send(const CollectiveCall& call, const Tensor& value) {
  auto [work, done] = begin("send", call);
  start_send(call, value, std::move(done));
  return work;
}

std::shared_ptr<Work> Communicator::recv(const CollectiveCall& call, Tensor& value) {
  auto [work, done] = begin("recv", call);
  start_recv(call, value, std::move(done));
  return work;
}

namespace {

graph::Status not_supported(std::string_view operation, const CollectiveCall& call, const Communicator& communicator) {
  return graph::unimplemented(std::string(operation) + " '" + call.group + "' is not supported by " +
                              std::string(communicator.name()));
}

}  // namespace

void Communicator::start_all_reduce(const CollectiveCall& call, Reduction, std::span<const Tensor>, std::span<Tensor>,
                                    CollectiveDone done) {
  done(not_supported("all_reduce", call, *this));
}

void Communicator::start_reduce_scatter(const CollectiveCall& call, Reduction, std::span<const Tensor>, std::span<Tensor>,
                                        CollectiveDone done) {
  done(not_supported("reduce_scatter", call, *this));
}

void Communicator::start_all_gather(const CollectiveCall& call, std::span<const Tensor>, std::span<Tensor>,
                                    CollectiveDone done) {
  done(not_supported("all_gather", call, *this));
}

void Communicator::start_broadcast(const CollectiveCall& call, int, Tensor&, CollectiveDone done) {
  done(not_supported("broadcast", call, *this));
}

void Communicator::start_send(const CollectiveCall& call, const Tensor&, CollectiveDone done) {
  done(not_supported("send", call, *this));
}

void Communicator::start_recv(const CollectiveCall& call, Tensor&, CollectiveDone done) {
  done(not_supported("recv", call, *this));
}

std::string participant_list(const std::vector<int>& participants) {
  std::string out;
  for (int p : participants) out += (out.empty() ? "" : ", ") + std::to_string(p);
  return out;
}

graph::Expected<Communicator*> CommunicatorSet::find(std::string_view name) const {
  if (name == "auto" && !communicators_.empty()) return communicators_.front().get();
  std::string known;
  for (const auto& communicator : communicators_) {
    if (communicator->name() == name) return communicator.get();
    known += (known.empty() ? "" : ", ") + std::string(communicator->name());
  }
  return graph::not_found("no collective implementation '" + std::string(name) + "' in this session (there are: " +
                          (known.empty() ? std::string("none") : known) + ")");
}

void CommunicatorSet::abandon(std::span<const CollectiveInstance> executions, const graph::Status& why) const {
  if (executions.empty()) return;
  for (const auto& communicator : communicators_) {
    for (const CollectiveInstance& which : executions) communicator->abandon(which, why);
  }
  std::vector<AbandonObserver> observers;
  {
    std::lock_guard lock(observers_->mutex);
    observers = observers_->list;
  }
  for (const AbandonObserver& observer : observers) {
    for (const CollectiveInstance& which : executions) observer(which, why);
  }
}

void CommunicatorSet::observe_abandoned(AbandonObserver observer) const {
  std::lock_guard lock(observers_->mutex);
  observers_->list.push_back(std::move(observer));
}

}  // namespace mirra::runtime
