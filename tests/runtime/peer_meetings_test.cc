// PeerMeetings over a peer library whose failures the test injects (what NCCL's GPUs meet through,
// without the GPUs): the last rank issues every rank in one group call and communicators are made
// once per device set; a meeting past its deadline, an error a communicator reports, a launch that
// fails and a connection that cannot be made each fail every unfinished rank naming the group, the
// step and the devices, abort the communicators once (and every other meeting in flight on them) and
// leave the next meeting new ones; a rank whose device finished first keeps its result; ranks on one
// device are refused. And the Communicator over them (PeerCommunicator, NCCL's): its calls meet
// through the library, and refused or abandoned steps fail their waiting participants now.
#include <doctest/doctest.h>

#include <algorithm>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "runtime/collectives/peer_communicator.h"
#include "runtime/collectives/peer_meetings.h"

namespace mirra::runtime {
namespace {

using namespace std::chrono_literals;

// A device whose calls finish at once, or, holding, only when released (as an aborted NCCL call
// returns); it reports success either way, as a GPU does.
class FakeDevice {
 public:
  explicit FakeDevice(bool holding = false) : holding_(holding) {}

  void when_done(std::function<void(graph::Status)> callback) {
    {
      std::lock_guard lock(mutex_);
      if (holding_) return pending_.push_back(std::move(callback));
    }
    callback(graph::Status());
  }
  void release() {
    std::vector<std::function<void(graph::Status)>> pending;
    {
      std::lock_guard lock(mutex_);
      holding_ = false;
      pending.swap(pending_);
    }
    for (auto& callback : pending) callback(graph::Status());
  }

 private:
  std::mutex mutex_;
  bool holding_;
  std::vector<std::function<void(graph::Status)>> pending_;
};

// What the library was asked to do, in order.
class Log {
 public:
  void add(std::string line) {
    std::lock_guard lock(mutex_);
    lines_.push_back(std::move(line));
  }
  std::vector<std::string> lines() {
    std::lock_guard lock(mutex_);
    return lines_;
  }

 private:
  std::mutex mutex_;
  std::vector<std::string> lines_;
};

class FakeLibrary;

class FakeCommunicators final : public PeerCommunicators {
 public:
  FakeCommunicators(FakeLibrary& library, int id) : library_(library), id_(id) {}
  int id() const { return id_; }
  graph::Status async_error() override;
  void abort() override;

 private:
  FakeLibrary& library_;
  int id_;
};

class FakeLibrary final : public PeerLibrary {
 public:
  std::string_view name() const override { return "FAKE"; }
  graph::Expected<std::shared_ptr<PeerCommunicators>> connect(const std::vector<int>& devices) override {
    std::string line = "connect";
    for (int d : devices) line += " " + std::to_string(d);
    log.add(line);
    std::lock_guard lock(mutex);
    if (failing_connects > 0) {
      --failing_connects;
      return graph::internal_error("FAKE: no route to device " + std::to_string(devices.back()));
    }
    return std::shared_ptr<PeerCommunicators>(std::make_shared<FakeCommunicators>(*this, ++connections));
  }
  graph::Status group_start() override {
    log.add("group start");
    return graph::Status();
  }
  graph::Status group_end() override {
    log.add("group end");
    return graph::Status();
  }

  // Participant p's part on gpu:p (devices[p]), for the communicator over it; refused past them.
  graph::Expected<PeerPart> all_reduce(const CollectiveCall& call, Reduction, std::span<const Tensor>, std::span<Tensor>) override;

  Log log;
  std::vector<FakeDevice*> devices;
  std::mutex mutex;
  int failing_connects = 0;
  int connections = 0;
  graph::Status async_error;                 // what every communicator reports
  std::vector<FakeDevice*> released_on_abort;  // an abort makes their held calls return
};

graph::Status FakeCommunicators::async_error() {
  std::lock_guard lock(library_.mutex);
  return library_.async_error;
}

void FakeCommunicators::abort() {
  library_.log.add("abort " + std::to_string(id_));
  for (FakeDevice* device : library_.released_on_abort) device->release();
}

// A rank's result, once it came.
class Result {
 public:
  void set(const graph::Status& status) {
    std::lock_guard lock(mutex_);
    CHECK_FALSE(message_.has_value());  // once
    message_ = status.ok() ? "ok" : status.message();
    came_.notify_all();
  }
  std::string wait() {
    std::unique_lock lock(mutex_);
    if (!came_.wait_for(lock, 10s, [this] { return message_.has_value(); })) return "(no result)";
    return *message_;
  }
  bool came() {
    std::lock_guard lock(mutex_);
    return message_.has_value();
  }

 private:
  std::mutex mutex_;
  std::condition_variable came_;
  std::optional<std::string> message_;
};

struct RankSetup {
  int physical = 0;
  FakeDevice* device = nullptr;
  Result* result = nullptr;
  CollectiveClock::time_point deadline = CollectiveClock::time_point::max();
  graph::Status launch_status;
};

PeerPart part(Log& log, const RankSetup& setup) {
  PeerPart part;
  part.device = "gpu:" + std::to_string(setup.physical);
  part.physical = setup.physical;
  part.launch = [&log, setup](PeerCommunicators& communicators, size_t rank) {
    log.add("launch rank " + std::to_string(rank) + " on " + std::to_string(static_cast<FakeCommunicators&>(communicators).id()));
    return setup.launch_status;
  };
  part.when_device_done = [device = setup.device](std::function<void(graph::Status)> callback) {
    device->when_done(std::move(callback));
  };
  part.deadline = setup.deadline;
  part.done = [result = setup.result](graph::Status status) { result->set(status); };
  return part;
}

graph::Expected<PeerPart> FakeLibrary::all_reduce(const CollectiveCall& call, Reduction, std::span<const Tensor>,
                                                  std::span<Tensor>) {
  if (call.participant >= static_cast<int>(devices.size())) {
    return graph::invalid_argument("FAKE: participant " + std::to_string(call.participant) + " has no device");
  }
  return part(log, {call.participant, devices[static_cast<size_t>(call.participant)]});
}

constexpr const void* kSession = nullptr;

TEST_CASE("PeerMeetings.the_last_rank_issues_every_rank_in_one_group_call_on_communicators_made_once") {
  FakeLibrary library;
  PeerMeetings meetings(library, 5ms);
  FakeDevice gpu0, gpu2;
  for (int64_t step = 1; step <= 2; ++step) {
    Result r0, r1;
    meetings.arrive(kSession, "AllReduce", "bucket", step, 1, 2, part(library.log, {2, &gpu2, &r1}));
    CHECK_FALSE(r1.came());
    meetings.arrive(kSession, "AllReduce", "bucket", step, 0, 2, part(library.log, {0, &gpu0, &r0}));
    CHECK(r0.wait() == "ok");
    CHECK(r1.wait() == "ok");
  }
  const std::vector<std::string> once = {"group start", "launch rank 0 on 1", "launch rank 1 on 1", "group end"};
  std::vector<std::string> expected = {"connect 0 2"};
  expected.insert(expected.end(), once.begin(), once.end());
  expected.insert(expected.end(), once.begin(), once.end());
  CHECK(library.log.lines() == expected);
}

TEST_CASE("PeerMeetings.a_meeting_past_its_deadline_fails_naming_group_step_and_devices_and_the_next_connects_anew") {
  FakeLibrary library;
  PeerMeetings meetings(library, 5ms);
  FakeDevice gpu0(true), gpu1(true);  // a peer that never sends: the calls hang until aborted
  library.released_on_abort = {&gpu0, &gpu1};
  Result r0, r1;
  const auto deadline = CollectiveClock::now() + 100ms;
  meetings.arrive(kSession, "AllReduce", "bucket", 7, 0, 2, part(library.log, {0, &gpu0, &r0, deadline}));
  meetings.arrive(kSession, "AllReduce", "bucket", 7, 1, 2, part(library.log, {1, &gpu1, &r1, deadline}));
  const std::string expected =
      "AllReduce 'bucket' (instance 7) over gpu:0, gpu:1: not finished by its deadline; the FAKE communicators were aborted";
  CHECK(r0.wait() == expected);
  CHECK(r1.wait() == expected);
  CHECK(library.log.lines().back() == "abort 1");

  Result next0, next1;
  meetings.arrive(kSession, "AllReduce", "bucket", 8, 0, 2, part(library.log, {0, &gpu0, &next0}));
  meetings.arrive(kSession, "AllReduce", "bucket", 8, 1, 2, part(library.log, {1, &gpu1, &next1}));
  CHECK(next0.wait() == "ok");
  CHECK(next1.wait() == "ok");
  const std::vector<std::string> lines = library.log.lines();
  CHECK(std::count(lines.begin(), lines.end(), "connect 0 1") == 2);
  CHECK(lines.back() == "group end");
  CHECK(std::count(lines.begin(), lines.end(), "launch rank 0 on 2") == 1);
}

TEST_CASE("PeerMeetings.an_error_a_communicator_reports_fails_the_meeting_and_aborts_its_communicators") {
  FakeLibrary library;
  PeerMeetings meetings(library, 5ms);
  FakeDevice gpu0(true), gpu1(true);
  library.released_on_abort = {&gpu0, &gpu1};
  Result r0, r1;
  meetings.arrive(kSession, "ReduceScatter", "shards", 3, 0, 2, part(library.log, {0, &gpu0, &r0}));
  meetings.arrive(kSession, "ReduceScatter", "shards", 3, 1, 2, part(library.log, {1, &gpu1, &r1}));
  {
    std::lock_guard lock(library.mutex);
    library.async_error = graph::internal_error("NCCL failed: remote process exited");
  }
  const std::string expected = "ReduceScatter 'shards' (instance 3) over gpu:0, gpu:1: NCCL failed: remote process exited";
  CHECK(r0.wait() == expected);
  CHECK(r1.wait() == expected);
  const std::vector<std::string> lines = library.log.lines();
  CHECK(std::count(lines.begin(), lines.end(), "abort 1") == 1);
}

TEST_CASE("PeerMeetings.a_launch_that_fails_aborts_and_its_ranks_complete_only_once_their_devices_returned") {
  FakeLibrary library;
  PeerMeetings meetings(library, 5ms);
  FakeDevice gpu0(true), gpu1(true);  // rank 0's calls went out and wait for rank 1's, which never come
  library.released_on_abort = {&gpu0};
  Result r0, r1;
  meetings.arrive(kSession, "AllGather", "params", 2, 0, 2, part(library.log, {0, &gpu0, &r0}));
  meetings.arrive(kSession, "AllGather", "params", 2, 1, 2,
                  part(library.log, {1, &gpu1, &r1, CollectiveClock::time_point::max(), graph::internal_error("ncclBroadcast failed: invalid usage")}));
  const std::string expected = "AllGather 'params' (instance 2) over gpu:0, gpu:1: ncclBroadcast failed: invalid usage";
  CHECK(r0.wait() == expected);
  CHECK_FALSE(r1.came());  // its device has not returned yet
  gpu1.release();
  CHECK(r1.wait() == expected);
  const std::vector<std::string> lines = library.log.lines();
  CHECK(std::count(lines.begin(), lines.end(), "abort 1") == 1);
}

TEST_CASE("PeerMeetings.communicators_that_cannot_be_made_fail_the_meeting_and_the_next_tries_again") {
  FakeLibrary library;
  library.failing_connects = 1;
  PeerMeetings meetings(library, 5ms);
  FakeDevice gpu0, gpu1;
  Result r0, r1;
  meetings.arrive(kSession, "AllReduce", "bucket", 1, 0, 2, part(library.log, {0, &gpu0, &r0}));
  meetings.arrive(kSession, "AllReduce", "bucket", 1, 1, 2, part(library.log, {1, &gpu1, &r1}));
  CHECK(r0.wait() == "AllReduce 'bucket' (instance 1) over gpu:0, gpu:1: FAKE: no route to device 1");
  CHECK(r1.wait() == r0.wait());
  Result next0, next1;
  meetings.arrive(kSession, "AllReduce", "bucket", 2, 0, 2, part(library.log, {0, &gpu0, &next0}));
  meetings.arrive(kSession, "AllReduce", "bucket", 2, 1, 2, part(library.log, {1, &gpu1, &next1}));
  CHECK(next0.wait() == "ok");
  CHECK(next1.wait() == "ok");
  CHECK(library.log.lines().front() == "connect 0 1");
  CHECK(library.log.lines().at(1) == "connect 0 1");
}

TEST_CASE("PeerMeetings.an_abort_fails_every_meeting_in_flight_on_those_communicators") {
  FakeLibrary library;
  PeerMeetings meetings(library, 5ms);
  FakeDevice gpu0(true), gpu1(true);
  library.released_on_abort = {&gpu0, &gpu1};
  Result first0, first1, second0, second1;
  const auto soon = CollectiveClock::now() + 150ms;
  // Without a deadline of its own, the second would return from the abort reporting success.
  meetings.arrive(kSession, "AllReduce", "bucket_0", 5, 0, 2, part(library.log, {0, &gpu0, &first0, soon}));
  meetings.arrive(kSession, "AllReduce", "bucket_0", 5, 1, 2, part(library.log, {1, &gpu1, &first1, soon}));
  meetings.arrive(kSession, "AllReduce", "bucket_1", 5, 0, 2, part(library.log, {0, &gpu0, &second0}));
  meetings.arrive(kSession, "AllReduce", "bucket_1", 5, 1, 2, part(library.log, {1, &gpu1, &second1}));
  CHECK(first0.wait() == "AllReduce 'bucket_0' (instance 5) over gpu:0, gpu:1: not finished by its deadline; the FAKE "
                         "communicators were aborted");
  const std::string second =
      "AllReduce 'bucket_1' (instance 5) over gpu:0, gpu:1: the FAKE communicators were aborted after another meeting on "
      "them failed: not finished by its deadline; the FAKE communicators were aborted";
  CHECK(second0.wait() == second);
  CHECK(second1.wait() == second);
  CHECK(first1.wait() == first0.wait());
  const std::vector<std::string> lines = library.log.lines();
  CHECK(std::count(lines.begin(), lines.end(), "abort 1") == 1);
  CHECK(std::count(lines.begin(), lines.end(), "connect 0 1") == 1);
}

TEST_CASE("PeerMeetings.a_rank_whose_device_finished_before_the_failure_keeps_its_result") {
  FakeLibrary library;
  PeerMeetings meetings(library, 5ms);
  FakeDevice gpu0, gpu1(true);
  library.released_on_abort = {&gpu1};
  Result r0, r1;
  const auto deadline = CollectiveClock::now() + 100ms;
  meetings.arrive(kSession, "AllReduce", "bucket", 1, 0, 2, part(library.log, {0, &gpu0, &r0, deadline}));
  meetings.arrive(kSession, "AllReduce", "bucket", 1, 1, 2, part(library.log, {1, &gpu1, &r1, deadline}));
  CHECK(r0.wait() == "ok");
  CHECK(r1.wait() ==
        "AllReduce 'bucket' (instance 1) over gpu:0, gpu:1: not finished by its deadline; the FAKE communicators were aborted");
}

TEST_CASE("PeerMeetings.ranks_on_one_device_are_refused_naming_them") {
  FakeLibrary library;
  PeerMeetings meetings(library, 5ms);
  FakeDevice gpu0;
  Result r0, r1, r2;
  meetings.arrive(kSession, "AllReduce", "bucket", 1, 0, 3, part(library.log, {0, &gpu0, &r0}));
  meetings.arrive(kSession, "AllReduce", "bucket", 1, 1, 3, part(library.log, {1, &gpu0, &r1}));
  meetings.arrive(kSession, "AllReduce", "bucket", 1, 2, 3, part(library.log, {1, &gpu0, &r2}));
  CHECK(r2.wait() ==
        "AllReduce 'bucket' (instance 1) over gpu:0, gpu:1, gpu:1: FAKE takes one rank per device, and ranks 1 and 2 are both on gpu:1");
  CHECK(r0.wait() == r2.wait());
  CHECK(library.log.lines().empty());
}

// A session's PeerCommunicator: its calls meet through the library, an operation the library lacks
// is refused naming it, a participant the library refuses fails its group now, and a step the
// session abandons fails its waiting participants now; what it leaves waiting is dropped with it.
TEST_CASE("PeerCommunicator.meets_through_the_library_and_fails_refused_and_abandoned_steps_now") {
  FakeLibrary library;
  PeerMeetings meetings(library, 5ms);
  FakeDevice gpu0, gpu1;
  library.devices = {&gpu0, &gpu1};
  const void* scope = nullptr;
  {
    CommunicatorSet communicators;
    auto peer = std::make_shared<PeerCommunicator>("fake", meetings, library);
    communicators.add(peer);
    scope = peer.get();
    const auto call = [](int participant, int group_size, int64_t instance) {
      return CollectiveCall{.group = "bucket", .instance = instance, .participant = participant, .group_size = group_size};
    };
    std::vector<Tensor> values = {Tensor::from<float>({2}, {1, 2})};
    auto first = peer->all_reduce(call(0, 2, 1), Reduction::sum, values, values);
    auto second = peer->all_reduce(call(1, 2, 1), Reduction::sum, values, values);
    CHECK(first->wait().ok());
    CHECK(second->wait().ok());
    CHECK(library.log.lines() ==
          std::vector<std::string>{"connect 0 1", "group start", "launch rank 0 on 1", "launch rank 1 on 1", "group end"});

    CHECK(peer->broadcast(call(0, 2, 2), 0, values[0])->wait().message() == "broadcast 'bucket' is not supported by fake");

    auto waiting = peer->all_reduce(call(0, 3, 3), Reduction::sum, values, values);
    const graph::Status refused = peer->all_reduce(call(2, 3, 3), Reduction::sum, values, values)->wait();
    CHECK(refused.message() == "FAKE: participant 2 has no device");
    CHECK(waiting->wait().message() == "all_reduce 'bucket' (instance 3): the step failed elsewhere: FAKE: participant 2 has no device");

    auto abandoned = peer->all_reduce(call(0, 2, 4), Reduction::sum, values, values);
    const std::vector<CollectiveInstance> step = {{"bucket", 4}};
    communicators.abandon(step, graph::internal_error("'loss': NaN"));
    CHECK(abandoned->wait().message() == "all_reduce 'bucket' (instance 4): the step failed elsewhere: 'loss': NaN");
  }
  Result after;  // the communicator is gone: what it left is forgotten
  meetings.arrive(scope, "all_reduce", "bucket", 4, 0, 1, part(library.log, {0, &gpu0, &after}));
  CHECK(after.wait() == "ok");
}

}  // namespace
}  // namespace mirra::runtime
