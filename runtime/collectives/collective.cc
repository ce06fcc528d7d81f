// deadline_after, worker_share, the operations an implementation does not offer, the rendezvous's
// participant lists and the CollectiveSet table with its observers of abandoned steps.
#include "runtime/collectives/collective.h"

#include "runtime/collectives/rendezvous.h"

namespace mirra::runtime {

CollectiveClock::time_point deadline_after(std::chrono::milliseconds timeout) {
  if (timeout.count() <= 0) return CollectiveClock::time_point::max();
  return CollectiveClock::now() + timeout;
}

ShareRange worker_share(int64_t count, int64_t group_size, int64_t p, int64_t workers, int64_t w) {
  int64_t first = 0;
  for (int64_t q = 0; q < p; ++q) first += participant_share(count, group_size, q);
  const int64_t share = participant_share(count, group_size, p);
  for (int64_t v = 0; v < w; ++v) first += participant_share(share, workers, v);
  return {first, participant_share(share, workers, w)};
}

namespace {

graph::Status not_supported(std::string_view operation, const CollectiveCall& call, const Collective& collective) {
  return graph::unimplemented(std::string(operation) + " '" + call.group + "' is not supported by " + std::string(collective.name()));
}

}  // namespace

void Collective::all_reduce(const CollectiveCall& call, Reduction, std::span<const Tensor>, std::span<Tensor>,
                            CollectiveDone done) {
  done(not_supported("all_reduce", call, *this));
}

void Collective::reduce_scatter(const CollectiveCall& call, Reduction, std::span<const Tensor>, std::span<Tensor>,
                                CollectiveDone done) {
  done(not_supported("reduce_scatter", call, *this));
}

void Collective::all_gather(const CollectiveCall& call, std::span<const Tensor>, std::span<Tensor>, CollectiveDone done) {
  done(not_supported("all_gather", call, *this));
}

void Collective::broadcast(const CollectiveCall& call, int, Tensor&, CollectiveDone done) {
  done(not_supported("broadcast", call, *this));
}

std::string participant_list(const std::vector<int>& participants) {
  std::string out;
  for (int p : participants) out += (out.empty() ? "" : ", ") + std::to_string(p);
  return out;
}

graph::Expected<Collective*> CollectiveSet::find(std::string_view name) const {
  if (name == "auto" && !collectives_.empty()) return collectives_.front().get();
  std::string known;
  for (const auto& collective : collectives_) {
    if (collective->name() == name) return collective.get();
    known += (known.empty() ? "" : ", ") + std::string(collective->name());
  }
  return graph::not_found("no collective implementation '" + std::string(name) + "' in this session (there are: " +
                          (known.empty() ? std::string("none") : known) + ")");
}

void CollectiveSet::abandon(std::span<const CollectiveInstance> executions, const graph::Status& why) const {
  if (executions.empty()) return;
  for (const auto& collective : collectives_) {
    for (const CollectiveInstance& which : executions) collective->abandon(which, why);
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

void CollectiveSet::observe_abandoned(AbandonObserver observer) const {
  std::lock_guard lock(observers_->mutex);
  observers_->list.push_back(std::move(observer));
}

}  // namespace mirra::runtime
