// Arrivals: notices of reached collectives and heartbeats between workers.
#include "runtime/collectives/mpi_arrivals.h"

#include <algorithm>

namespace mirra::runtime {

Arrivals::Arrivals(int rank, int size, MPI_Comm comm)
    : rank_(rank), size_(size), comm_(comm), last_heard_(static_cast<size_t>(size), Clock::now()) {}

int64_t Arrivals::announce(int64_t group) {
  const int64_t run = ++runs_[group];
  tell_everyone(group, run);
  poll();
  return run;
}

void Arrivals::heartbeat() {
  const auto now = Clock::now();
  if (now - last_heartbeat_ < kHeartbeat) return;
  last_heartbeat_ = now;
  tell_everyone(kAlive, 0);
}

void Arrivals::poll() {
  for (;;) {
    if (receive_ == MPI_REQUEST_NULL && MPI_Irecv(incoming_, 2, MPI_INT64_T, MPI_ANY_SOURCE, 0, comm_, &receive_) != MPI_SUCCESS) {
      receive_ = MPI_REQUEST_NULL;
      break;
    }
    int received = 0;
    MPI_Status status;
    if (MPI_Test(&receive_, &received, &status) != MPI_SUCCESS || !received) break;
    last_heard_[static_cast<size_t>(status.MPI_SOURCE)] = Clock::now();
    if (incoming_[0] == kAlive) continue;
    if (keep_times_) arrived_at_[{status.MPI_SOURCE, incoming_[0], incoming_[1]}] = Clock::now();
    int64_t& reached = reached_[{status.MPI_SOURCE, incoming_[0]}];
    reached = std::max(reached, incoming_[1]);
  }
  while (!sending_.empty()) {
    int sent = 0;
    if (MPI_Test(&sending_.front().request, &sent, MPI_STATUS_IGNORE) != MPI_SUCCESS || !sent) break;
    sending_.pop_front();
  }
}

std::vector<int> Arrivals::silent() {
  poll();
  std::vector<int> workers;
  const auto now = Clock::now();
  for (int peer = 0; peer < size_; ++peer) {
    if (peer != rank_ && now - last_heard_[static_cast<size_t>(peer)] > 4 * kHeartbeat) workers.push_back(peer);
  }
  return workers;
}

std::vector<int> Arrivals::missing(int64_t group) {
  poll();
  std::vector<int> workers;
  const int64_t run = runs_[group];
  for (int peer = 0; peer < size_; ++peer) {
    if (peer == rank_) continue;
    const auto it = reached_.find({peer, group});
    if (it == reached_.end() || it->second < run) workers.push_back(peer);
  }
  return workers;
}

void Arrivals::keep_times(bool on) {
  keep_times_ = on;
  if (!on) arrived_at_.clear();
}

Arrivals::Clock::time_point Arrivals::last_arrival(int64_t group, int64_t run, Clock::time_point floor) {
  Clock::time_point last = floor;
  for (int peer = 0; peer < size_; ++peer) {
    const auto first = arrived_at_.lower_bound({peer, group, 0});
    const auto end = arrived_at_.upper_bound({peer, group, run});
    for (auto it = first; it != end; ++it) {
      if (std::get<2>(it->first) == run) last = std::max(last, it->second);
    }
    arrived_at_.erase(first, end);
  }
  return last;
}

void Arrivals::stop() {
  if (receive_ != MPI_REQUEST_NULL) {
    MPI_Cancel(&receive_);
    MPI_Wait(&receive_, MPI_STATUS_IGNORE);
  }
  for (Notice& notice : sending_) MPI_Request_free(&notice.request);
  sending_.clear();
}

void Arrivals::tell_everyone(int64_t group, int64_t run) {
  for (int peer = 0; peer < size_; ++peer) {
    if (peer == rank_) continue;
    Notice& notice = sending_.emplace_back();
    notice.data[0] = group;
    notice.data[1] = run;
    if (MPI_Isend(notice.data, 2, MPI_INT64_T, peer, 0, comm_, &notice.request) != MPI_SUCCESS) sending_.pop_back();
  }
}

}  // namespace mirra::runtime
