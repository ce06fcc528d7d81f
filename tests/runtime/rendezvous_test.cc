// The Rendezvous every collective meets at: the last participant gets every part in participant
// order, and only meetings of the same scope, group and instance meet; refusals name the participant
// in the rendezvous's own noun; an abandoned instance fails its waiting parts now and later ones at
// once, in its scope only, until the scope is forgotten; a meeting past its deadline names every
// missing participant, and a late one fails at once; destruction fails the waiting.
#include <doctest/doctest.h>

#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "runtime/collectives/rendezvous.h"

namespace mirra::runtime {
namespace {

using namespace std::chrono_literals;

// What a participant heard, from whichever thread completed it (the deadline watchdog's, too).
class Heard {
 public:
  void add(std::string line) {
    std::lock_guard lock(mutex_);
    lines_.push_back(std::move(line));
  }
  std::vector<std::string> lines() const {
    std::lock_guard lock(mutex_);
    return lines_;
  }

 private:
  mutable std::mutex mutex_;
  std::vector<std::string> lines_;
};

// What a participant brings: its name, and where its completion's status goes.
struct Part {
  std::string name;
  std::shared_ptr<Heard> heard = std::make_shared<Heard>();
  void done(const graph::Status& status) const { heard->add(status.ok() ? "ok" : status.message()); }
};

constexpr auto kNever = CollectiveClock::time_point::max();

TEST_CASE("Rendezvous.the_last_participant_gets_every_part_in_order_and_scopes_never_meet") {
  Rendezvous<Part> meetings;
  int scope_a = 0, scope_b = 0;
  CHECK_FALSE(meetings.arrive({&scope_a, "g", 1}, "g", 2, 3, kNever, {"a2"}).has_value());
  CHECK_FALSE(meetings.arrive({&scope_b, "g", 1}, "g", 0, 3, kNever, {"b0"}).has_value());
  CHECK_FALSE(meetings.arrive({&scope_a, "g", 2}, "g", 0, 3, kNever, {"a0 of 2"}).has_value());
  CHECK_FALSE(meetings.arrive({&scope_a, "h", 1}, "h", 0, 3, kNever, {"h0"}).has_value());
  CHECK_FALSE(meetings.arrive({&scope_a, "g", 1}, "g", 0, 3, kNever, {"a0"}).has_value());
  const auto parts = meetings.arrive({&scope_a, "g", 1}, "g", 1, 3, kNever, {"a1"});
  REQUIRE(parts.has_value());
  REQUIRE(parts->size() == 3);
  CHECK((*parts)[0].name == "a0");
  CHECK((*parts)[1].name == "a1");
  CHECK((*parts)[2].name == "a2");
  CHECK((*parts)[0].heard->lines().empty());  // completing them is the caller's
  const auto alone = meetings.arrive({nullptr, "solo", 1}, "solo", 0, 1, kNever, {"solo"});
  REQUIRE(alone.has_value());
  CHECK(alone->size() == 1);
}

TEST_CASE("Rendezvous.refusals_name_the_participant_in_its_noun") {
  Rendezvous<Part> meetings("rank");
  Part outside{"outside"}, twice{"twice"}, other_size{"other size"}, first{"first"};
  CHECK_FALSE(meetings.arrive({nullptr, "g", 1}, "AllReduce 'g' (instance 1)", 3, 2, kNever, outside).has_value());
  CHECK(outside.heard->lines() == std::vector<std::string>{"AllReduce 'g' (instance 1): rank 3 is not in a group of 2"});
  CHECK_FALSE(meetings.arrive({nullptr, "g", 1}, "AllReduce 'g' (instance 1)", 0, 2, kNever, first).has_value());
  CHECK_FALSE(meetings.arrive({nullptr, "g", 1}, "AllReduce 'g' (instance 1)", 0, 2, kNever, twice).has_value());
  CHECK(twice.heard->lines() == std::vector<std::string>{"AllReduce 'g' (instance 1): rank 0 arrived twice"});
  CHECK_FALSE(meetings.arrive({nullptr, "g", 1}, "AllReduce 'g' (instance 1)", 1, 3, kNever, other_size).has_value());
  CHECK(other_size.heard->lines() ==
        std::vector<std::string>{"AllReduce 'g' (instance 1): rank 1 names a group of 3 where the first named 2"});
  CHECK(first.heard->lines().empty());  // still waiting
}

TEST_CASE("Rendezvous.an_abandoned_instance_fails_its_parts_in_its_scope_until_forgotten") {
  Rendezvous<Part> meetings;
  int session = 0, other = 0;
  Part waiting{"waiting"}, elsewhere{"elsewhere"}, later{"later"}, other_group{"other group"}, next_step{"next step"},
      after_forget{"after forget"};
  meetings.arrive({&session, "g", 7}, "all_reduce 'g' (instance 7)", 0, 2, kNever, waiting);
  meetings.arrive({&other, "g", 7}, "all_reduce 'g' (instance 7)", 0, 2, kNever, elsewhere);
  meetings.abandon({&session, "g", 7}, graph::internal_error("replica 1's loss is NaN"));
  CHECK(waiting.heard->lines() == std::vector<std::string>{"all_reduce 'g' (instance 7): the step failed elsewhere: replica 1's loss is NaN"});
  CHECK(elsewhere.heard->lines().empty());
  CHECK_FALSE(meetings.arrive({&session, "g", 7}, "all_reduce 'g' (instance 7)", 1, 2, kNever, later).has_value());
  CHECK(later.heard->lines() == std::vector<std::string>{"all_reduce 'g' (instance 7): the step failed elsewhere: replica 1's loss is NaN"});
  // Another group's execution of the same number is another meeting.
  CHECK_FALSE(meetings.arrive({&session, "h", 7}, "all_reduce 'h' (instance 7)", 1, 2, kNever, other_group).has_value());
  CHECK(other_group.heard->lines().empty());
  CHECK_FALSE(meetings.arrive({&session, "g", 8}, "all_reduce 'g' (instance 8)", 0, 2, kNever, next_step).has_value());
  CHECK(next_step.heard->lines().empty());
  meetings.forget(&session);
  CHECK_FALSE(meetings.arrive({&session, "g", 7}, "all_reduce 'g' (instance 7)", 0, 2, kNever, after_forget).has_value());
  CHECK(after_forget.heard->lines().empty());  // a new session at the same address starts afresh
  CHECK(meetings.arrive({&other, "g", 7}, "all_reduce 'g' (instance 7)", 1, 2, kNever, {"other"}).has_value());
}

TEST_CASE("Rendezvous.a_meeting_past_its_deadline_names_the_missing_and_a_late_one_fails_at_once") {
  Rendezvous<Part> meetings;
  Part first{"first"}, late{"late"};
  const auto deadline = CollectiveClock::now() + 100ms;
  meetings.arrive({nullptr, "bucket", 3}, "all_reduce 'bucket' (instance 3)", 1, 4, deadline, first);
  for (int i = 0; i < 3000 && first.heard->lines().empty(); ++i) std::this_thread::sleep_for(1ms);
  REQUIRE(first.heard->lines().size() == 1);
  CHECK(first.heard->lines().front().starts_with("all_reduce 'bucket' (instance 3): participants 0, 2, 3 of 4 did not arrive within "));
  CHECK(first.heard->lines().front().ends_with(" (arrived: 1)"));
  CHECK_FALSE(meetings.arrive({nullptr, "bucket", 3}, "all_reduce 'bucket' (instance 3)", 0, 4, kNever, late).has_value());
  CHECK(late.heard->lines() ==
        std::vector<std::string>{"all_reduce 'bucket' (instance 3): participant 0 arrived after the deadline had passed for the others"});
}

TEST_CASE("Rendezvous.destruction_fails_the_waiting") {
  Part waiting{"waiting"};
  {
    Rendezvous<Part> meetings("rank");
    meetings.arrive({nullptr, "g", 1}, "AllGather 'g' (instance 1)", 0, 2, CollectiveClock::now() + 1h, waiting);
  }
  CHECK(waiting.heard->lines() ==
        std::vector<std::string>{"AllGather 'g' (instance 1): the collective was shut down before every rank arrived"});
}

}  // namespace
}  // namespace mirra::runtime
