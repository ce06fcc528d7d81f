// PeerMeetings: meeting, issuing in one group call, the connections by device set, and the watchdog
// that fails and aborts (Note [Aborting a connection]).
#include "runtime/collectives/peer_meetings.h"

#include <algorithm>
#include <utility>

namespace mirra::runtime {

// A group's execution for one step, from the last arrival until every rank completed.
struct PeerMeetings::Meeting {
  std::string what;  // "AllReduce 'all_reduce/bucket_0' (step 7) over gpu:0, gpu:2"
  std::vector<PeerPart> ranks;
  CollectiveClock::time_point deadline = CollectiveClock::time_point::max();
  std::shared_ptr<Connection> connection;  // set when issued
  std::mutex mutex;
  int unfinished = 0;     // ranks whose device has not returned
  graph::Status failure;  // once set, every rank still unfinished receives it

  // Sets the failure unless one is set or every rank has finished; whether it did.
  bool fail(const graph::Status& why) {
    std::lock_guard lock(mutex);
    if (unfinished == 0 || !failure.ok()) return false;
    failure = why;
    return true;
  }
  bool finished() {
    std::lock_guard lock(mutex);
    return unfinished == 0;
  }
};

PeerMeetings::PeerMeetings(PeerLibrary& library, std::chrono::milliseconds poll) : library_(library), poll_(poll) {}

PeerMeetings::~PeerMeetings() {
  issuer_.reset();  // issues what has arrived, which may start the watchdog
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (watchdog_.joinable()) watchdog_.join();
}

void PeerMeetings::arrive(const void* scope, std::string_view op, const std::string& group, int64_t instance, int rank,
                          int ranks, PeerPart part) {
  const std::string what = std::string(op) + " '" + group + "' (instance " + std::to_string(instance) + ")";
  const CollectiveClock::time_point deadline = part.deadline;
  std::optional<std::vector<PeerPart>> parts = meetings_.arrive({scope, group, instance}, what, rank, ranks, deadline, std::move(part));
  if (!parts) return;
  auto meeting = std::make_shared<Meeting>();
  meeting->what = what;
  for (const PeerPart& p : *parts) meeting->deadline = std::min(meeting->deadline, p.deadline);
  meeting->ranks = std::move(*parts);
  issuer_->enqueue([this, meeting] { issue(meeting); });
}

void PeerMeetings::abandon(const void* scope, const CollectiveInstance& which, const graph::Status& why) {
  meetings_.abandon({scope, which.group, which.instance}, why);
}

void PeerMeetings::forget(const void* scope) { meetings_.forget(scope); }

namespace {

graph::Expected<PeerPart> not_offered(const PeerLibrary& library, std::string_view operation, const CollectiveCall& call) {
  return graph::unimplemented(std::string(operation) + " '" + call.group + "' is not supported by " + std::string(library.name()));
}

}  // namespace

graph::Expected<PeerPart> PeerLibrary::all_reduce(const CollectiveCall& call, Reduction, std::span<const Tensor>, std::span<Tensor>) {
  return not_offered(*this, "all_reduce", call);
}
graph::Expected<PeerPart> PeerLibrary::reduce_scatter(const CollectiveCall& call, Reduction, std::span<const Tensor>,
                                                      std::span<Tensor>) {
  return not_offered(*this, "reduce_scatter", call);
}
graph::Expected<PeerPart> PeerLibrary::all_gather(const CollectiveCall& call, std::span<const Tensor>, std::span<Tensor>) {
  return not_offered(*this, "all_gather", call);
}

// On the issuing thread, one meeting at a time, so that every device's stream receives the
// meetings' calls in the same order.
void PeerMeetings::issue(const std::shared_ptr<Meeting>& meeting) {
  std::string devices;
  for (const PeerPart& rank : meeting->ranks) devices += (devices.empty() ? "" : ", ") + rank.device;
  meeting->what += " over " + devices;
  graph::Expected<std::shared_ptr<Connection>> connection = connect(meeting);
  if (!connection.ok()) {
    for (PeerPart& rank : meeting->ranks) rank.done(connection.status().with_context(meeting->what));
    return;
  }
  graph::Status issued;
  {
    std::lock_guard use((*connection)->use);
    if (!(*connection)->aborted) {  // else the abort failed this meeting already
      issued = library_.group_start();
      for (size_t r = 0; issued.ok() && r < meeting->ranks.size(); ++r) {
        issued = meeting->ranks[r].launch(*(*connection)->communicators, r);
      }
      const graph::Status ended = library_.group_end();
      if (issued.ok()) issued = ended;
    }
  }
  if (!issued.ok() && meeting->fail(issued)) abort(*connection, issued);
  for (PeerPart& rank : meeting->ranks) {
    rank.when_device_done([meeting, done = std::move(rank.done)](graph::Status device) {
      graph::Status status;
      {
        std::lock_guard lock(meeting->mutex);
        status = meeting->failure.ok() ? std::move(device) : meeting->failure;
        --meeting->unfinished;
      }
      done(status.ok() ? status : status.with_context(meeting->what));
    });
  }
}

// The set's connection, made on first use; the meeting is in flight on it from here, watched.
graph::Expected<std::shared_ptr<PeerMeetings::Connection>> PeerMeetings::connect(const std::shared_ptr<Meeting>& meeting) {
  std::vector<int> devices;
  for (const PeerPart& rank : meeting->ranks) devices.push_back(rank.physical);
  for (size_t r = 0; r < devices.size(); ++r) {
    for (size_t q = 0; q < r; ++q) {
      if (devices[q] != devices[r]) continue;
      return graph::invalid_argument(std::string(library_.name()) + " takes one rank per device, and ranks " + std::to_string(q) +
                                     " and " + std::to_string(r) + " are both on " + meeting->ranks[r].device);
    }
  }
  std::lock_guard lock(mutex_);
  std::shared_ptr<Connection>& connection = connections_[devices];
  if (!connection) {
    graph::Expected<std::shared_ptr<PeerCommunicators>> made = library_.connect(devices);
    if (!made.ok()) {
      connections_.erase(devices);
      return made.status();
    }
    connection = std::make_shared<Connection>();
    connection->devices = devices;
    connection->communicators = std::move(*made);
  }
  meeting->connection = connection;
  meeting->unfinished = static_cast<int>(meeting->ranks.size());
  in_flight_.push_back(meeting);
  if (!watchdog_.joinable()) watchdog_ = std::thread([this] { watch(); });
  wake_.notify_all();
  return connection;
}

// Every `poll_` while meetings are in flight: the finished ones are dropped; one whose communicators
// report an error, or whose deadline passed, fails, and its connection is aborted.
void PeerMeetings::watch() {
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    if (in_flight_.empty()) {
      wake_.wait(lock);
    } else {
      wake_.wait_for(lock, poll_);
    }
    std::erase_if(in_flight_, [](const std::shared_ptr<Meeting>& meeting) { return meeting->finished(); });
    const std::vector<std::shared_ptr<Meeting>> watched = in_flight_;
    lock.unlock();
    const auto now = CollectiveClock::now();
    for (const auto& meeting : watched) {
      graph::Status problem;
      {
        std::lock_guard use(meeting->connection->use);
        if (!meeting->connection->aborted) problem = meeting->connection->communicators->async_error();
      }
      if (problem.ok() && now > meeting->deadline) {
        problem = graph::deadline_exceeded("not finished by its deadline; the " + std::string(library_.name()) +
                                           " communicators were aborted");
      }
      if (!problem.ok() && meeting->fail(problem)) abort(meeting->connection, problem);
    }
    lock.lock();
  }
}

// Note [Aborting a connection]
// An abort makes every call pending on the communicators return unfinished, whichever meeting issued
// it, so every meeting in flight on them fails: a device that returned from an aborted call would
// otherwise report success with a partial sum. The connection leaves the table first, so that no
// meeting is issued on it again (one being issued finds it aborted, under `use`, and launches
// nothing). The communicators are then aborted under `use`: never while the issuing thread or the
// watchdog calls them, and only once.
void PeerMeetings::abort(const std::shared_ptr<Connection>& connection, const graph::Status& why) {
  std::vector<std::shared_ptr<Meeting>> affected;
  {
    std::lock_guard lock(mutex_);
    if (connection->aborted.exchange(true)) return;
    const auto it = connections_.find(connection->devices);
    if (it != connections_.end() && it->second == connection) connections_.erase(it);
    for (const auto& meeting : in_flight_) {
      if (meeting->connection == connection) affected.push_back(meeting);
    }
  }
  const graph::Status others = graph::aborted("the " + std::string(library_.name()) +
                                              " communicators were aborted after another meeting on them failed: " + why.message());
  for (const auto& meeting : affected) meeting->fail(others);
  std::lock_guard use(connection->use);
  connection->communicators->abort();
}

}  // namespace mirra::runtime
