// Rendezvous: where the participants of one execution of a collective meet before it runs, shared
// by every implementation (in process, the local replicas of a worker before the MPI step, NCCL's
// ranks). A meeting is keyed by (scope, group, instance): the scope keeps apart what must never meet
// (two sessions of one process); the instance is the execution. The last participant to arrive gets
// every participant's part back, by participant, and runs the collective on its own thread; the
// others only leave their part. Nothing blocks.
//
// Every failure completes the parts it concerns through their `done` (Part has a member `done`
// callable with a graph::Status): a participant outside the group, one that arrives twice or names
// another group size; a meeting whose deadline passed (a watchdog thread, started when a part first
// waits with a deadline, fails the parts that came, naming those that did not, and a participant
// that comes later fails at once); an instance abandoned because its step failed elsewhere (waiting
// parts fail now, later ones when they arrive); and the rendezvous's destruction.
//
//   Rendezvous<Arrival> meetings("participant");
//   if (auto parts = meetings.arrive({nullptr, "bucket_0", step}, "all_reduce 'bucket_0' (instance 7)",
//                                    participant, group_size, deadline, std::move(arrival))) {
//     run(*parts);  // the last one: every participant's part
//   }
#pragma once

#include <algorithm>
#include <compare>
#include <condition_variable>
#include <cstdio>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "graph/status.h"
#include "runtime/collectives/communicator.h"

namespace mirra::runtime {

struct RendezvousKey {
  const void* scope = nullptr;  // what may meet only itself (a session), or nullptr
  std::string group;
  int64_t instance = 0;
  auto operator<=>(const RendezvousKey&) const = default;
};

// "2, 3" of the participants listed.
std::string participant_list(const std::vector<int>& participants);

template <class Part>
class Rendezvous {
 public:
  // `noun` names a participant in messages ("participant", "rank").
  explicit Rendezvous(std::string noun = "participant") : noun_(std::move(noun)) {}
  Rendezvous(const Rendezvous&) = delete;
  Rendezvous& operator=(const Rendezvous&) = delete;

  // Parts still waiting fail with aborted.
  ~Rendezvous() {
    std::map<RendezvousKey, Meeting> waiting;
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
      waiting.swap(meetings_);
    }
    changed_.notify_all();
    if (watchdog_.joinable()) watchdog_.join();
    for (auto& [key, meeting] : waiting) {
      fail_arrived(meeting, graph::aborted(meeting.what + ": the collective was shut down before every " + noun_ + " arrived"));
    }
  }

  // Participant `participant` of `group_size` brings `part` to the meeting `key`, which `what`
  // describes in messages ("all_reduce 'bucket_0' (instance 7)"); the meeting's deadline is the
  // earliest its participants bring. Returns every part, by participant, to the last to arrive; else
  // nullopt, with the part waiting or already failed.
  std::optional<std::vector<Part>> arrive(const RendezvousKey& key, std::string_view what, int participant, int group_size,
                                          CollectiveClock::time_point deadline, Part part) {
    const auto who = [&] { return std::string(what) + ": " + noun_ + " " + std::to_string(participant); };
    if (group_size < 1 || participant < 0 || participant >= group_size) {
      part.done(graph::invalid_argument(who() + " is not in a group of " + std::to_string(group_size)));
      return std::nullopt;
    }
    graph::Status refused;
    std::optional<std::vector<Part>> complete;
    {
      std::lock_guard lock(mutex_);
      if (const auto abandoned = abandoned_.find(key); abandoned != abandoned_.end()) {
        refused = graph::aborted(std::string(what) + ": the step failed elsewhere: " + abandoned->second.message());
      } else if (expired_.contains(key)) {
        refused = graph::deadline_exceeded(who() + " arrived after the deadline had passed for the others");
      } else {
        Meeting& meeting = meetings_[key];
        if (meeting.parts.empty()) {
          meeting.what = std::string(what);
          meeting.first_arrival = CollectiveClock::now();
          meeting.parts.resize(static_cast<size_t>(group_size));
        }
        std::optional<Part>& slot = meeting.parts[static_cast<size_t>(std::min(participant, meeting.size() - 1))];
        if (meeting.size() != group_size) {
          refused = graph::invalid_argument(who() + " names a group of " + std::to_string(group_size) + " where the first named " +
                                            std::to_string(meeting.size()));
        } else if (slot) {
          refused = graph::invalid_argument(who() + " arrived twice");
        } else {
          slot = std::move(part);
          meeting.deadline = std::min(meeting.deadline, deadline);
          if (++meeting.arrived == group_size) {
            complete.emplace();
            for (std::optional<Part>& p : meeting.parts) complete->push_back(std::move(*p));
            meetings_.erase(key);
          } else if (meeting.deadline != CollectiveClock::time_point::max()) {
            if (!watchdog_.joinable()) watchdog_ = std::thread([this] { watch_deadlines(); });
            changed_.notify_all();
          }
        }
      }
    }
    if (!refused.ok()) part.done(std::move(refused));
    return complete;
  }

  // The meeting `key` failed elsewhere (its step): its waiting parts fail now with `why`, and parts
  // that arrive for it later at once.
  void abandon(const RendezvousKey& key, const graph::Status& why) {
    std::optional<Meeting> waiting;
    {
      std::lock_guard lock(mutex_);
      abandoned_.emplace(key, why);
      if (auto it = meetings_.find(key); it != meetings_.end()) {
        waiting = std::move(it->second);
        meetings_.erase(it);
      }
    }
    if (waiting) fail_arrived(*waiting, graph::aborted(waiting->what + ": the step failed elsewhere: " + why.message()));
  }

  // `scope` is gone: what was kept of it goes too (its waiting parts are dropped, not completed).
  void forget(const void* scope) {
    std::lock_guard lock(mutex_);
    std::erase_if(meetings_, [scope](const auto& entry) { return entry.first.scope == scope; });
    std::erase_if(expired_, [scope](const RendezvousKey& key) { return key.scope == scope; });
    std::erase_if(abandoned_, [scope](const auto& entry) { return entry.first.scope == scope; });
  }

 private:
  struct Meeting {
    std::string what;
    std::vector<std::optional<Part>> parts;  // by participant; empty until it arrives
    int arrived = 0;
    CollectiveClock::time_point deadline = CollectiveClock::time_point::max();
    CollectiveClock::time_point first_arrival;
    int size() const { return static_cast<int>(parts.size()); }
  };

  static void fail_arrived(Meeting& meeting, const graph::Status& status) {
    for (std::optional<Part>& part : meeting.parts) {
      if (part) part->done(status);
    }
  }

  // Fails the meetings whose deadline passed, naming who did not arrive.
  void watch_deadlines() {
    std::unique_lock lock(mutex_);
    while (!stopping_) {
      auto next = CollectiveClock::time_point::max();
      for (const auto& [key, meeting] : meetings_) next = std::min(next, meeting.deadline);
      if (next == CollectiveClock::time_point::max()) {
        changed_.wait(lock);
        continue;
      }
      if (changed_.wait_until(lock, next) != std::cv_status::timeout) continue;
      const auto now = CollectiveClock::now();
      std::vector<Meeting> expired;
      for (auto it = meetings_.begin(); it != meetings_.end();) {
        if (it->second.deadline <= now) {
          expired_.insert(it->first);
          expired.push_back(std::move(it->second));
          it = meetings_.erase(it);
        } else {
          ++it;
        }
      }
      lock.unlock();
      for (Meeting& meeting : expired) fail_arrived(meeting, missing(meeting, now));
      lock.lock();
    }
  }

  // "all_reduce 'b' (instance 7): participant 2 of 3 did not arrive within 1.5 s (arrived: 0, 1)"
  graph::Status missing(const Meeting& meeting, CollectiveClock::time_point now) const {
    std::vector<int> absent, present;
    for (int p = 0; p < meeting.size(); ++p) (meeting.parts[static_cast<size_t>(p)] ? present : absent).push_back(p);
    char waited[32];
    std::snprintf(waited, sizeof waited, "%.3g s", std::chrono::duration<double>(now - meeting.first_arrival).count());
    return graph::deadline_exceeded(meeting.what + ": " + noun_ + (absent.size() > 1 ? "s " : " ") + participant_list(absent) +
                                    " of " + std::to_string(meeting.size()) + " did not arrive within " + waited +
                                    " (arrived: " + participant_list(present) + ")");
  }

  const std::string noun_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<RendezvousKey, Meeting> meetings_;
  std::set<RendezvousKey> expired_;  // so that a late participant fails at once instead of waiting again
  std::map<RendezvousKey, graph::Status> abandoned_;  // meetings that failed elsewhere -> why
  std::thread watchdog_;
  bool stopping_ = false;
};

}  // namespace mirra::runtime
