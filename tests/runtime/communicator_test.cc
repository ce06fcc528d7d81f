// The in-process Communicator against plain loops: all_reduce (sum and mean, f32 and f64, odd and
// empty sizes, in place or not; every participant gets the same bits), reduce_scatter (a bucket of
// tensors), all_gather and broadcast, with participants arriving from their own threads; mismatched
// participants are an error naming who; a participant that never arrives fails the others with
// deadline_exceeded naming it (never a hang); one that comes late fails at once; shutting down
// completes the waiting with aborted; a call's Work waits with a deadline, calls back once done and
// aborts a call still waiting (its peers' too); the set tells its observers of an abandoned step; two sessions
// whose ranks meet through one collective agree on its executions whatever else each ran. worker_share
// (the cut across workers) against plain loops; the operations an implementation does not offer
// are unimplemented, naming it.
#include <doctest/doctest.h>

#include <future>
#include <thread>

#include "ops/ops.h"
#include "runtime/collectives/in_process_communicator.h"
#include "runtime/random.h"
#include "runtime/session.h"

namespace mirra::runtime {
namespace {

using namespace std::chrono_literals;

// One participant's call: its status, once done.
struct Completion {
  std::promise<graph::Status> promise;
  std::future<graph::Status> future = promise.get_future();
  CollectiveDone done() {
    return [this](graph::Status status) { promise.set_value(std::move(status)); };
  }
  // The status, failing the test instead of hanging when the call never completes.
  graph::Status get() {
    REQUIRE_MESSAGE(future.wait_for(30s) == std::future_status::ready, "the collective did not complete");
    return future.get();
  }
};

template <class T>
Tensor random_tensor(const TensorShape& shape, uint64_t seed) {
  Random rng(seed);
  std::vector<T> values(static_cast<size_t>(shape.num_elements()));
  for (T& v : values) v = static_cast<T>(2 * rng.uniform() - 1);
  return Tensor::from<T>(shape, std::span<const T>(values));
}

CollectiveCall call(const char* group, int participant, int group_size,
                    CollectiveClock::time_point deadline = CollectiveClock::time_point::max()) {
  return {.group = group, .instance = 7, .participant = participant, .group_size = group_size, .deadline = deadline};
}

// Runs `body(p)` for every participant on its own thread.
template <class F>
void each_participant_on_its_thread(int group_size, F body) {
  std::vector<std::thread> threads;
  for (int p = 0; p < group_size; ++p) threads.emplace_back([&body, p] { body(p); });
  for (std::thread& t : threads) t.join();
}

template <class T>
void check_all_reduce(int group_size, int64_t elements, Reduction reduction, bool in_place) {
  CAPTURE(group_size);
  CAPTURE(elements);
  CAPTURE(in_place);
  InProcessCommunicator collective;
  std::vector<std::vector<Tensor>> inputs(group_size), outputs(group_size);
  for (int p = 0; p < group_size; ++p) {
    for (int64_t size : {elements, int64_t{3}}) {  // a bucket of two tensors
      Tensor input = random_tensor<T>({size}, 100 * static_cast<uint64_t>(p) + static_cast<uint64_t>(size));
      inputs[p].push_back(input);
      outputs[p].push_back(in_place ? input : Tensor::empty(host_allocator(), input.dtype(), input.shape()));
    }
  }
  // The reference, before any buffer is overwritten: a plain loop in participant order.
  std::vector<std::vector<T>> expected;
  for (size_t j = 0; j < inputs[0].size(); ++j) {
    std::vector<T> sum = inputs[0][j].template to_vector<T>();
    for (int p = 1; p < group_size; ++p) {
      const auto values = inputs[p][j].template values<T>();
      for (size_t i = 0; i < sum.size(); ++i) sum[i] += values[i];
    }
    if (reduction == Reduction::mean) {
      for (T& v : sum) v /= static_cast<T>(group_size);
    }
    expected.push_back(sum);
  }
  std::vector<Completion> completions(group_size);
  each_participant_on_its_thread(group_size, [&](int p) {
    collective.all_reduce(call("bucket", p, group_size), reduction, inputs[p], outputs[p])->then(completions[p].done());
  });
  for (int p = 0; p < group_size; ++p) {
    const graph::Status status = completions[p].get();
    REQUIRE_MESSAGE(status.ok(), status.to_string());
    for (size_t j = 0; j < expected.size(); ++j) CHECK(outputs[p][j].template to_vector<T>() == expected[j]);
  }
}

TEST_CASE("Communicator.in_process.all_reduce.matches_a_plain_loop_bitwise") {
  for (int group_size : {1, 2, 3}) {
    for (int64_t elements : {int64_t{0}, int64_t{1}, int64_t{2049}, int64_t{65536 * 2 + 5}}) {
      check_all_reduce<float>(group_size, elements, Reduction::sum, true);
      check_all_reduce<float>(group_size, elements, Reduction::mean, false);
      check_all_reduce<double>(group_size, elements, Reduction::sum, false);
    }
  }
}

// A bucket of two tensors: 65536 + 7 elements (shares 21848, 21848, 21847: a first larger than the
// rest) and 2 (shares 1, 1, 0: one participant gets nothing).
TEST_CASE("Communicator.in_process.reduce_scatter.gives_each_participant_its_share_of_each_tensor") {
  const int group_size = 3;
  const int64_t sizes[] = {65536 + 7, 2};
  InProcessCommunicator collective;
  std::vector<std::vector<Tensor>> inputs(group_size), outputs(group_size);
  std::vector<std::vector<float>> sums;
  for (int p = 0; p < group_size; ++p) {
    for (int64_t n : sizes) {
      inputs[p].push_back(random_tensor<float>({n}, static_cast<uint64_t>(p * 10 + n)));
      outputs[p].push_back(Tensor::empty(host_allocator(), graph::DType::f32, {participant_share(n, group_size, p)}));
    }
  }
  for (size_t j = 0; j < std::size(sizes); ++j) {
    std::vector<float> sum = inputs[0][j].to_vector<float>();
    for (int p = 1; p < group_size; ++p) {
      for (size_t i = 0; i < sum.size(); ++i) sum[i] += inputs[p][j].values<float>()[i];
    }
    sums.push_back(sum);
  }
  std::vector<Completion> completions(group_size);
  each_participant_on_its_thread(group_size, [&](int p) {
    collective.reduce_scatter(call("scatter", p, group_size), Reduction::sum, inputs[p], outputs[p])->then(completions[p].done());
  });
  for (int p = 0; p < group_size; ++p) REQUIRE(completions[p].get().ok());
  for (size_t j = 0; j < std::size(sizes); ++j) {
    int64_t offset = 0;
    for (int p = 0; p < group_size; ++p) {
      const int64_t share = participant_share(sizes[j], group_size, p);
      CHECK(outputs[p][j].to_vector<float>() == std::vector<float>(sums[j].begin() + offset, sums[j].begin() + offset + share));
      offset += share;
    }
  }
}

// worker_share: the parts of every participant of every worker tile [0, count) in (participant,
// worker) order, each participant's parts make its share, and any two parts differ by at most one.
TEST_CASE("Communicator.worker_share.tiles_the_elements_in_participant_then_worker_order") {
  for (int64_t count : {0, 1, 5, 6, 61, 1000, 65543}) {
    for (int64_t group_size : {1, 2, 3}) {
      for (int64_t workers : {1, 2, 3, 4}) {
        CAPTURE(count);
        CAPTURE(group_size);
        CAPTURE(workers);
        int64_t next = 0, smallest = count, largest = 0;
        for (int64_t p = 0; p < group_size; ++p) {
          int64_t in_share = 0;
          for (int64_t w = 0; w < workers; ++w) {
            const ShareRange part = worker_share(count, group_size, p, workers, w);
            CHECK(part.first == next);
            next += part.count;
            in_share += part.count;
            smallest = std::min(smallest, part.count);
            largest = std::max(largest, part.count);
          }
          CHECK(in_share == participant_share(count, group_size, p));
          CHECK(worker_share(count, group_size, p, 1, 0).count == participant_share(count, group_size, p));
        }
        CHECK(next == count);
        CHECK(largest - smallest <= 1);
      }
    }
  }
}

TEST_CASE("Communicator.in_process.all_gather_and_broadcast.copy_exactly") {
  const int group_size = 3;
  InProcessCommunicator collective;
  std::vector<Tensor> inputs, gathered, broadcast;
  std::vector<int64_t> stacked;
  for (int p = 0; p < group_size; ++p) {
    std::vector<int64_t> rows(static_cast<size_t>(2 * p), p);  // p rows of 2: 0, 1 and 2 rows
    inputs.push_back(Tensor::from<int64_t>({p, 2}, std::span<const int64_t>(rows)));
    stacked.insert(stacked.end(), rows.begin(), rows.end());
    gathered.push_back(Tensor::empty(host_allocator(), graph::DType::i64, {3, 2}));
    broadcast.push_back(p == 1 ? Tensor::from<int64_t>({2}, {5, 6}) : Tensor::from<int64_t>({2}, {0, 0}));
  }
  std::vector<Completion> gather_done(group_size), broadcast_done(group_size);
  each_participant_on_its_thread(group_size, [&](int p) {
    collective.all_gather(call("gather", p, group_size), {&inputs[p], 1}, {&gathered[p], 1})->then(gather_done[p].done());
    collective.broadcast(call("broadcast", p, group_size), 1, broadcast[p])->then(broadcast_done[p].done());
  });
  for (int p = 0; p < group_size; ++p) {
    REQUIRE(gather_done[p].get().ok());
    REQUIRE(broadcast_done[p].get().ok());
    CHECK(gathered[p].to_vector<int64_t>() == stacked);
    CHECK(broadcast[p].to_vector<int64_t>() == std::vector<int64_t>{5, 6});
  }
}

TEST_CASE("Communicator.in_process.mismatched_participants.are_an_error_naming_who") {
  InProcessCommunicator collective;
  Tensor a = Tensor::from<float>({2}, {1, 2}), b = Tensor::from<float>({3}, {1, 2, 3});
  Completion first, second;
  collective.all_reduce(call("bucket", 0, 2), Reduction::sum, {&a, 1}, {&a, 1})->then(first.done());
  collective.all_reduce(call("bucket", 1, 2), Reduction::sum, {&b, 1}, {&b, 1})->then(second.done());
  for (Completion* c : {&first, &second}) {
    const graph::Status status = c->get();
    CHECK(status.code() == graph::StatusCode::invalid_argument);
    CHECK(status.message() == "all_reduce 'bucket' (instance 7): participant 1 holds f32[3] where participant 0 holds f32[2]");
  }
  Tensor ints = Tensor::from<int64_t>({1}, {1});
  Completion only;
  collective.all_reduce(call("ints", 0, 1), Reduction::sum, {&ints, 1}, {&ints, 1})->then(only.done());
  CHECK(only.get().message() == "all_reduce 'ints' (instance 7): cannot reduce i64[1] (f32, f64 or bf16)");
  Completion outside;
  collective.broadcast(call("outside", 3, 2), 0, a)->then(outside.done());
  CHECK(outside.get().message() == "broadcast 'outside' (instance 7): participant 3 is not in a group of 2");
}

TEST_CASE("Communicator.deadline_after.none_for_no_timeout_or_one_past_the_clocks_end") {
  CHECK(deadline_after(0ms) == CollectiveClock::time_point::max());
  CHECK(deadline_after(-1ms) == CollectiveClock::time_point::max());
  CHECK(deadline_after(std::chrono::milliseconds::max()) == CollectiveClock::time_point::max());
  const auto before = CollectiveClock::now();
  const auto deadline = deadline_after(250ms);
  CHECK(deadline >= before + 250ms);
  CHECK(deadline <= CollectiveClock::now() + 250ms);
}

TEST_CASE("Communicator.in_process.deadline.names_who_did_not_arrive") {
  InProcessCommunicator collective;
  const auto deadline = deadline_after(100ms);
  Tensor x0 = Tensor::from<float>({1}, {1}), x1 = Tensor::from<float>({1}, {2}), x2 = Tensor::from<float>({1}, {3});
  Completion arrived0, arrived1;
  collective.all_reduce(call("bucket_3", 0, 3, deadline), Reduction::sum, {&x0, 1}, {&x0, 1})->then(arrived0.done());
  collective.all_reduce(call("bucket_3", 1, 3, deadline), Reduction::sum, {&x1, 1}, {&x1, 1})->then(arrived1.done());
  // Participant 2 never arrives in time.
  for (Completion* c : {&arrived0, &arrived1}) {
    const graph::Status status = c->get();
    CHECK(status.code() == graph::StatusCode::deadline_exceeded);
    CHECK(status.message().starts_with("all_reduce 'bucket_3' (instance 7): participant 2 of 3 did not arrive within "));
    CHECK(status.message().ends_with(" (arrived: 0, 1)"));
  }
  CHECK(x0.to_vector<float>() == std::vector<float>{1});  // nothing was reduced
  Completion late;
  collective.all_reduce(call("bucket_3", 2, 3, deadline), Reduction::sum, {&x2, 1}, {&x2, 1})->then(late.done());
  const graph::Status status = late.get();
  CHECK(status.code() == graph::StatusCode::deadline_exceeded);
  CHECK(status.message() == "all_reduce 'bucket_3' (instance 7): participant 2 arrived after the deadline had passed for the others");
}

TEST_CASE("Communicator.in_process.shutdown.aborts_the_waiting") {
  Completion waiting;
  Tensor x = Tensor::from<float>({1}, {1});
  {
    InProcessCommunicator collective;
    collective.all_reduce(call("bucket", 0, 2), Reduction::sum, {&x, 1}, {&x, 1})->then(waiting.done());
  }
  const graph::Status status = waiting.get();
  CHECK(status.code() == graph::StatusCode::aborted);
  CHECK(status.message() == "all_reduce 'bucket' (instance 7): the collective was shut down before every participant arrived");
}

// A collective that offers nothing: every operation names itself and the implementation.
class Offline final : public Communicator {
 public:
  std::string_view name() const override { return "offline"; }
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
};

// A call's Work: not done while a participant is missing (a wait with a deadline says so and the
// call goes on), done with the sum once the last arrives, a callback given then runs at once; an
// abort fails a call still waiting and its execution's other participants, and changes nothing once
// a call is done.
TEST_CASE("Communicator.work.waits_calls_back_and_aborts") {
  InProcessCommunicator collective;
  Tensor a = Tensor::from<float>({1}, {1}), b = Tensor::from<float>({1}, {2});
  std::shared_ptr<Work> first = collective.all_reduce(call("bucket", 0, 2), Reduction::sum, {&a, 1}, {&a, 1});
  CHECK_FALSE(first->done());
  CHECK(first->status().message() == "all_reduce 'bucket' (instance 7) has not finished");
  const graph::Status waited = first->wait(CollectiveClock::now() + 20ms);
  CHECK(waited.code() == graph::StatusCode::deadline_exceeded);
  CHECK(waited.message() == "all_reduce 'bucket' (instance 7) did not finish by the deadline it was waited for");
  std::vector<std::string> heard;
  first->then([&heard](graph::Status s) { heard.push_back("first: " + s.to_string()); });
  std::shared_ptr<Work> second = collective.all_reduce(call("bucket", 1, 2), Reduction::sum, {&b, 1}, {&b, 1});
  CHECK(second->wait().ok());
  CHECK(first->done());
  CHECK(a.to_vector<float>() == std::vector<float>{3});
  CHECK(heard == std::vector<std::string>{"first: ok"});
  second->then([&heard](graph::Status s) { heard.push_back("second: " + s.to_string()); });  // at once
  CHECK(heard == std::vector<std::string>{"first: ok", "second: ok"});
  second->abort(graph::Status(graph::StatusCode::cancelled, "too late"));
  CHECK(second->status().ok());

  std::shared_ptr<Work> waiting = collective.all_reduce(call("other", 0, 2), Reduction::sum, {&a, 1}, {&a, 1});
  waiting->abort(graph::Status(graph::StatusCode::cancelled, "the caller gave up"));
  CHECK(waiting->wait().message() == "all_reduce 'other' (instance 7): the step failed elsewhere: the caller gave up");
  std::shared_ptr<Work> peer = collective.all_reduce(call("other", 1, 2), Reduction::sum, {&b, 1}, {&b, 1});
  CHECK(peer->wait().code() == graph::StatusCode::aborted);
  CHECK(a.to_vector<float>() == std::vector<float>{3});  // untouched
}

TEST_CASE("Communicator.operations_an_implementation_does_not_offer.are_unimplemented_naming_it") {
  Offline collective;
  Tensor t = Tensor::from<float>({1}, {1.0f});
  std::vector<Tensor> tensors = {t};
  const CollectiveCall call{.group = "g"};
  std::vector<std::string> heard;
  const auto hear = [&heard](graph::Status s) {
    CHECK(s.code() == graph::StatusCode::unimplemented);
    heard.push_back(s.message());
  };
  collective.all_reduce(call, Reduction::sum, tensors, tensors)->then(hear);
  collective.reduce_scatter(call, Reduction::sum, tensors, tensors)->then(hear);
  collective.all_gather(call, tensors, tensors)->then(hear);
  collective.broadcast(call, 0, t)->then(hear);
  CHECK(heard == std::vector<std::string>{"all_reduce 'g' is not supported by offline", "reduce_scatter 'g' is not supported by offline",
                                          "all_gather 'g' is not supported by offline", "broadcast 'g' is not supported by offline"});
}

TEST_CASE("Communicator.set.finds_by_name_and_auto") {
  CommunicatorSet set;
  CHECK(set.find("auto").status().message() == "no collective implementation 'auto' in this session (there are: none)");
  set.add(std::make_shared<InProcessCommunicator>());
  REQUIRE(set.find("auto").ok());
  CHECK((*set.find("auto"))->name() == "in_process");
  CHECK((*set.find("in_process"))->world_size() == 1);
  const auto missing = set.find("nccl");
  CHECK(missing.status().code() == graph::StatusCode::not_found);
  CHECK(missing.status().message() == "no collective implementation 'nccl' in this session (there are: in_process)");
}

// Kernels that meet their peers outside a Communicator (NCCL's ranks) hear of a failed step through
// the set, after its collectives; the set keeps what an observer holds until it goes.
TEST_CASE("Communicator.set.observers_hear_of_abandoned_steps") {
  auto kept = std::make_shared<int>(0);
  std::vector<std::pair<CollectiveInstance, std::string>> heard;
  {
    CommunicatorSet set;
    auto collective = std::make_shared<InProcessCommunicator>();
    set.add(collective);
    set.observe_abandoned(
        [&heard, kept](const CollectiveInstance& which, const graph::Status& why) { heard.emplace_back(which, why.message()); });
    set.observe_abandoned([&heard](const CollectiveInstance& which, const graph::Status&) { heard.emplace_back(which, "second"); });
    CHECK(kept.use_count() == 2);

    Tensor x = Tensor::from<float>({1}, {1});
    Completion waiting;
    collective->all_reduce(call("bucket", 0, 2), Reduction::sum, {&x, 1}, {&x, 1})->then(waiting.done());
    const std::vector<CollectiveInstance> step = {{"bucket", 7}, {"loss", 3}};
    set.abandon(step, graph::invalid_argument("replica 1's loss is NaN"));
    CHECK(waiting.get().message().find("replica 1's loss is NaN") != std::string::npos);
    CHECK(heard == std::vector<std::pair<CollectiveInstance, std::string>>{{{"bucket", 7}, "replica 1's loss is NaN"},
                                                                          {{"loss", 3}, "replica 1's loss is NaN"},
                                                                          {{"bucket", 7}, "second"},
                                                                          {{"loss", 3}, "second"}});
  }
  CHECK(kept.use_count() == 1);
}

// The ranks of one all-reduce in two sessions that share the collective, as two workers' sessions
// share their processes' collective: one session first runs other steps (an evaluation of its own),
// and the ranks still meet, each execution of the group with its counterpart.
TEST_CASE("Communicator.sessions_that_ran_other_steps_still_meet_execution_by_execution") {
  auto shared = std::make_shared<InProcessCommunicator>();
  struct Rank {
    graph::Graph graph;
    graph::ValueRef sum, other;
    std::unique_ptr<Session> session;
  };
  std::vector<Rank> ranks(2);
  for (int r = 0; r < 2; ++r) {
    graph::Builder b(ranks[r].graph, ops::registry());
    const graph::ValueRef x = ops::placeholder(b, "x", graph::DType::f32, {2});
    ranks[r].sum = ops::all_reduce(b, {x}, {.group = "bucket", .rank = r, .ranks = 2}, "sum", {.timeout_ms = 20'000})[0];
    ranks[r].other = ops::neg(b, x);
    REQUIRE(b.status().ok());
    ranks[r].session = std::make_unique<Session>(ranks[r].graph, ops::kernels(), SessionOptions{.communicators = {shared}});
  }
  const auto value = [](float v) { return Feeds{{"x", Tensor::from<float>({2}, {v, 2 * v})}}; };
  for (int i = 0; i < 3; ++i) REQUIRE(ranks[0].session->run(value(1), {ranks[0].other}).ok());
  for (int step = 0; step < 3; ++step) {
    std::vector<std::vector<float>> sums(2);
    each_participant_on_its_thread(2, [&](int r) {
      auto out = ranks[r].session->run(value(static_cast<float>(step + 10 * r)), {ranks[r].sum});
      REQUIRE_MESSAGE(out.ok(), out.status().to_string());
      sums[r] = (*out)[0].to_vector<float>();
    });
    const float want = static_cast<float>(2 * step + 10);
    CHECK(sums[0] == std::vector<float>{want, 2 * want});
    CHECK(sums[1] == sums[0]);
  }
}

}  // namespace
}  // namespace mirra::runtime
