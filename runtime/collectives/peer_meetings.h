// PeerMeetings: the host side of the collectives among devices that meet through a peer library
// (NCCL between the GPUs of this process), written once over the library's interface (PeerLibrary)
// so that what happens when a meeting fails is tested without the devices (with a library whose
// failures a test injects).
//
// The ranks of a group (a node per device) meet at a Rendezvous keyed by (scope, group, instance),
// which fails the ranks of a meeting some rank did not come to by the deadline, naming it, and those
// of a step that failed elsewhere. Once the last has arrived, the meetings' own issuing thread makes
// every rank's calls in one group call (one thread launching for several devices must, or NCCL may
// block on the first rank waiting for the others; and not the last rank's thread, which holds its
// device's compute stream while issuing touches every device's streams). A rank completes when its
// device has run its calls.
//
// The communicators of a set of devices are made at its first meeting and kept. A watchdog polls the
// meetings in flight: one whose communicators report an error, or whose deadline passed, fails, and
// its communicators are aborted, which makes the devices' pending calls return, so that the step
// fails naming the group and the devices instead of hanging. Every other meeting in flight on those
// communicators fails with it (its calls returned unfinished), none is issued on them again, and the
// set's next meeting makes new ones. A rank whose device had finished before its meeting failed
// keeps its result; every later one receives the failure, once its device has returned (so that no
// buffer is released while a call may still use it).
//
// A PeerCommunicator (peer_communicator.h) is how kernels reach them: one per session, the scope of
// its meetings.
//
//   PeerMeetings meetings(library);  // NCCL's: never destroyed
//   meetings.arrive(scope, "all_reduce", "bucket_0", instance, rank, ranks, std::move(part));
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "graph/status.h"
#include "runtime/collectives/communicator.h"
#include "runtime/collectives/rendezvous.h"
#include "runtime/stream.h"

namespace mirra::runtime {

// The communicators a peer library made for one set of devices (NCCL: an ncclComm_t per GPU).
// PeerMeetings calls them from one thread at a time and never again after abort.
class PeerCommunicators {
 public:
  virtual ~PeerCommunicators() = default;
  // An error a communicator reported since its calls were issued; ok if none (ncclCommGetAsyncError).
  virtual graph::Status async_error() = 0;
  // Makes every call still pending on them return, unfinished (ncclCommAbort).
  virtual void abort() = 0;
};

// What one rank brings to its group's meeting.
struct PeerPart {
  std::string device;  // "gpu:1", for messages
  int physical = 0;    // the device its communicator is made for
  // Issues the rank's calls on communicator `rank` of `communicators`, inside the group call.
  std::function<graph::Status(PeerCommunicators& communicators, size_t rank)> launch;
  // Calls `callback` once the device has run what was issued so far, with the error it reported.
  std::function<void(std::function<void(graph::Status)> callback)> when_device_done;
  CollectiveClock::time_point deadline = CollectiveClock::time_point::max();
  // The rank's result, called once.
  std::function<void(graph::Status)> done;
};

// A library whose devices meet among themselves.
class PeerLibrary {
 public:
  virtual ~PeerLibrary() = default;
  virtual std::string_view name() const = 0;  // "NCCL"
  // Communicators for `devices` (physical ordinals, distinct; rank r on devices[r]).
  virtual graph::Expected<std::shared_ptr<PeerCommunicators>> connect(const std::vector<int>& devices) = 0;
  // Brackets a meeting's calls, every rank's (ncclGroupStart, ncclGroupEnd).
  virtual graph::Status group_start() = 0;
  virtual graph::Status group_end() = 0;

  // A participant's part of each Communicator operation over its device (`call.device`), its deadline
  // and done left to the caller; unimplemented by default, or where the library does not serve the
  // call, saying why.
  virtual graph::Expected<PeerPart> all_reduce(const CollectiveCall& call, Reduction reduction, std::span<const Tensor> inputs,
                                               std::span<Tensor> outputs);
  virtual graph::Expected<PeerPart> reduce_scatter(const CollectiveCall& call, Reduction reduction,
                                                   std::span<const Tensor> inputs, std::span<Tensor> outputs);
  virtual graph::Expected<PeerPart> all_gather(const CollectiveCall& call, std::span<const Tensor> inputs,
                                               std::span<Tensor> outputs);
};


class PeerMeetings {
 public:
  // The watchdog looks at the meetings in flight every `poll`.
  explicit PeerMeetings(PeerLibrary& library, std::chrono::milliseconds poll = std::chrono::milliseconds(50));
  // REQUIRES: no meeting in flight, and the collective sets it observes gone.
  ~PeerMeetings();
  PeerMeetings(const PeerMeetings&) = delete;
  PeerMeetings& operator=(const PeerMeetings&) = delete;

  // Rank `rank` of `ranks` of `op` ("all_reduce", for messages) arrives for the group's execution
  // `instance` in `scope` (a session's communicator); the last issues the meeting.
  void arrive(const void* scope, std::string_view op, const std::string& group, int64_t instance, int rank, int ranks,
              PeerPart part);
  // Execution `which` of `scope` failed elsewhere: its ranks still waiting fail with `why` now.
  void abandon(const void* scope, const CollectiveInstance& which, const graph::Status& why);
  // `scope` is gone (a later one may have its address): what it left waiting is dropped.
  void forget(const void* scope);

 private:
  // The communicators of one set of devices, while they are usable.
  struct Connection {
    std::vector<int> devices;
    std::shared_ptr<PeerCommunicators> communicators;
    std::mutex use;                // held while they are called
    std::atomic<bool> aborted{false};
  };
  struct Meeting;

  void issue(const std::shared_ptr<Meeting>& meeting);
  graph::Expected<std::shared_ptr<Connection>> connect(const std::shared_ptr<Meeting>& meeting);
  // Fails every meeting in flight on `connection` (with `why` where none failed it yet), then aborts
  // its communicators; once only.
  void abort(const std::shared_ptr<Connection>& connection, const graph::Status& why);
  void watch();

  PeerLibrary& library_;
  const std::chrono::milliseconds poll_;
  Rendezvous<PeerPart> meetings_{"rank"};  // by (scope, group, instance), until the last rank arrives
  std::mutex mutex_;
  std::map<std::vector<int>, std::shared_ptr<Connection>> connections_;  // by devices, rank order
  std::vector<std::shared_ptr<Meeting>> in_flight_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread watchdog_;
  std::unique_ptr<WorkerStream> issuer_ = std::make_unique<WorkerStream>("peer issue");
};

}  // namespace mirra::runtime
