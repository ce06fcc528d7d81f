// Arrivals: who among the workers reached which collective, and who is alive, for the MPI
// collective's communication thread (mpi_communicator.cc; MPI's types appear here, so only MPI code
// includes this header). A worker tells every other one, on a communicator of their own, each
// collective job it posts (the group, and how many times this group has run here: the same count on
// every worker) and, every kHeartbeat, that it lives. A worker whose job misses its deadline can
// then name the workers that fell silent (stopped, hung, dead) or never came, and a trace can show
// when the last other worker reached a collective.
#pragma once

#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <tuple>
#include <utility>
#include <vector>

#include "runtime/collectives/communicator.h"

namespace mirra::runtime {

class Arrivals {
 public:
  using Clock = CollectiveClock;
  // How often a worker tells the others it lives.
  static constexpr auto kHeartbeat = std::chrono::milliseconds(500);

  Arrivals(int rank, int size, MPI_Comm comm);

  // The n-th run of `group` here, told to every other worker; returns n.
  int64_t announce(int64_t group);
  // Tells everyone this worker lives, when kHeartbeat has passed since it last did.
  void heartbeat();
  // Takes in every notice that has come, and lets go of sent ones.
  void poll();

  // The workers not heard from for several heartbeats.
  std::vector<int> silent();
  // The workers that have not reached this worker's latest run of `group`.
  std::vector<int> missing(int64_t group);

  // Keeps (or stops keeping) when each notice came, for last_arrival.
  void keep_times(bool on);
  // When the last other worker's notice of `run` of `group` came (`floor` if all came before it or
  // none is known), forgetting the notices of that group up to that run.
  Clock::time_point last_arrival(int64_t group, int64_t run, Clock::time_point floor);

  // Stops receiving; sends still under way are left to MPI.
  void stop();

 private:
  static constexpr int64_t kAlive = -1;  // a heartbeat's group

  struct Notice {
    int64_t data[2];
    MPI_Request request = MPI_REQUEST_NULL;
  };

  void tell_everyone(int64_t group, int64_t run);

  const int rank_, size_;
  MPI_Comm comm_;
  Clock::time_point last_heartbeat_;
  std::vector<Clock::time_point> last_heard_;  // by worker
  int64_t incoming_[2] = {};
  MPI_Request receive_ = MPI_REQUEST_NULL;
  std::deque<Notice> sending_;                          // stable addresses while MPI holds them
  std::map<int64_t, int64_t> runs_;                     // group -> runs here
  std::map<std::pair<int, int64_t>, int64_t> reached_;  // (worker, group) -> its runs
  bool keep_times_ = false;
  std::map<std::tuple<int, int64_t, int64_t>, Clock::time_point> arrived_at_;  // (worker, group, run) -> when
};

}  // namespace mirra::runtime
