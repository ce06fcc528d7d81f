// A communicator registered from outside the tree with one call (runtime::register_communicator) is one
// a strategy's config may name: every session offers it, Mirrored's all-reduce ranks call it, and
// training runs as with the in-process one, to the bit. Registration refuses what would make names
// ambiguous, and a config naming a communicator no one registered is refused naming those there are.
#include <doctest/doctest.h>

#include <atomic>

#include "runtime/collectives/communicator_registry.h"
#include "runtime/collectives/in_process_communicator.h"
#include "tests/strategies/strategy_test_util.h"

namespace mirra::strategies::test {
namespace {

std::atomic<int> counted_all_reduces{0};

// An outside communicator: the in-process one's sums, each call counted.
class CountingCommunicator final : public runtime::Communicator {
 public:
  std::string_view name() const override { return "counting"; }
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  void abandon(const runtime::CollectiveInstance& which, const graph::Status& why) override { inner_.abandon(which, why); }

 protected:
  void start_all_reduce(const runtime::CollectiveCall& call, runtime::Reduction reduction, std::span<const runtime::Tensor> inputs,
                        std::span<runtime::Tensor> outputs, runtime::CollectiveDone done) override {
    ++counted_all_reduces;
    inner_.all_reduce(call, reduction, inputs, outputs)->then(std::move(done));
  }

 private:
  runtime::InProcessCommunicator inner_;
};

void register_counting() {
  static const graph::Status registered =
      runtime::register_communicator("counting", [] { return std::make_shared<CountingCommunicator>(); });
  REQUIRE(registered.ok());
}

TEST_CASE("Communicators.a_registered_communicator_serves_mirrored") {
  register_counting();
  const TrainingProgram program = build_program("mlp", ops::Optimizer::momentum_sgd(0.05, 0.9));
  const std::vector<Batch> batches = random_batches("mlp", 61, 4, 29);
  std::map<std::string, std::vector<double>> trained[2];
  for (int counting = 0; counting < 2; ++counting) {
    auto config = parse_strategy_config(counting == 1 ? R"({"strategy": "mirrored", "devices": ["cpu:0", "cpu:1"],
                                                            "all_reduce": {"implementation": "counting"}})"
                                                      : R"({"strategy": "mirrored", "devices": ["cpu:0", "cpu:1"]})",
                                        "c.json");
    REQUIRE_MESSAGE(config.ok(), config.status().to_string());
    auto strategy = make_strategy(*config);
    REQUIRE(strategy.ok());
    auto distributed = (*strategy)->distribute(program);
    REQUIRE(distributed.ok());
    runtime::Session session(distributed->graph, ops::kernels(), {.threads = 2});
    const int before = counted_all_reduces;
    for (const Batch& batch : batches) {
      const auto out = session.run(feeds(*distributed, batch), {}, {distributed->signature.train});
      REQUIRE_MESSAGE(out.ok(), out.status().to_string());
    }
    CHECK((counted_all_reduces > before) == (counting == 1));
    trained[counting] = float_variables(session);
  }
  CHECK(trained[0] == trained[1]);
}

TEST_CASE("Communicators.registration_refuses_ambiguous_names") {
  register_counting();
  const auto make = [] { return std::make_shared<CountingCommunicator>(); };
  CHECK(runtime::register_communicator("counting", make).message() == "communicator 'counting' is already registered");
  CHECK(runtime::register_communicator("in_process", make).message() == "communicator name 'in_process' is built in");
  CHECK(runtime::register_communicator("auto", make).message() == "communicator name 'auto' is built in");
  CHECK(runtime::register_communicator("Bad-Name", make).message() == "communicator name 'Bad-Name' must be made of [a-z0-9_]");
  CHECK(runtime::register_communicator("none", nullptr).message() == "communicator 'none' has no factory");
  CHECK(runtime::is_communicator_name("counting"));
  CHECK_FALSE(runtime::is_communicator_name("nccl"));
  const auto refused = parse_strategy_config(R"({"strategy": "mirrored", "all_reduce": {"implementation": "nccl"}})", "c.json");
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().message().find("is 'nccl', not one of auto, in_process, mpi, counting") != std::string::npos);
}

}  // namespace
}  // namespace mirra::strategies::test
