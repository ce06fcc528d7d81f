// Captured steps (SessionOptions::capture_steps, Note [Captured steps] in runtime/executor.h) on
// cpu_async devices, the GPU's model: training recorded once and replayed ends with the variables,
// bit for bit, and the losses of training run step by step, on one device, Mirrored over 2 devices
// (peer all-reduce) and over 2 logical devices of one (the on-device sum), with SGD momentum and
// Adam, with loss scaling through an overflowing step, and with a learning rate assigned before every
// step. A batch of another shape runs as usual; a step that a replay cannot repeat runs as usual and
// says why.
#include <doctest/doctest.h>

#include <limits>

#include "tests/strategies/strategy_test_util.h"

namespace mirra::strategies::test {
namespace {

using graph::DeviceKind;

TEST_CASE("CapturedSteps.replay_training_bit_for_bit_on_cpu_async_devices") {
  const std::vector<Batch> batches = random_batches("small_cnn", 64, 30, 71);
  const std::vector<graph::DeviceId> two = devices_of(DeviceKind::cpu_async, 2);
  for (const ops::Optimizer& optimizer : {ops::Optimizer::momentum_sgd(0.05, 0.9), ops::Optimizer::adam(0.01)}) {
    const TrainingProgram program = build_program("small_cnn", optimizer);
    for (const CaptureSetup& setup : {CaptureSetup{}, CaptureSetup{.strategy = "mirrored", .devices = two},
                               CaptureSetup{.strategy = "mirrored", .devices = two, .logical_per_device = 2}}) {
      CAPTURE(optimizer.kind);
      CAPTURE(setup.strategy);
      CAPTURE(setup.logical_per_device);
      const CapturedRun captured = check_replays_match(program, batches, setup);
      CHECK(captured.refusals.empty());
      CHECK(captured.replays == static_cast<int64_t>(batches.size()) - 1);  // all but the first step
    }
  }
}

TEST_CASE("CapturedSteps.replay_loss_scaling_through_an_overflow") {
  const ops::MinimizeOptions options{.loss_scaling = ops::LossScaling{.initial_scale = 32768, .growth_steps = 3}};
  const TrainingProgram program = build_program("small_cnn", ops::Optimizer::adam(0.01), options);
  std::vector<Batch> batches = random_batches("small_cnn", 64, 12, 5);
  batches[6].images.mutable_data<float>()[0] = std::numeric_limits<float>::infinity();  // a skipped update
  const CapturedRun captured = check_replays_match(program, batches, {.strategy = "mirrored", .devices = devices_of(DeviceKind::cpu_async, 2)});
  CHECK(captured.replays == static_cast<int64_t>(batches.size()) - 1);
}

TEST_CASE("CapturedSteps.replays_read_the_learning_rate_assigned_before_each_step") {
  const TrainingProgram program = build_program("small_cnn", ops::Optimizer::momentum_sgd(0.05, 0.9));
  const std::vector<Batch> batches = random_batches("small_cnn", 64, 10, 9);
  const CapturedRun captured = check_replays_match(program, batches, {.assign_rate = true});
  CHECK(captured.replays == static_cast<int64_t>(batches.size()) - 1);
}

TEST_CASE("CapturedSteps.a_batch_of_another_shape_runs_as_usual") {
  const TrainingProgram program = build_program("small_cnn", ops::Optimizer::momentum_sgd(0.05, 0.9));
  std::vector<Batch> batches = random_batches("small_cnn", 64, 8, 13);
  batches.push_back(random_batches("small_cnn", 61, 1, 17).front());  // the last, partial batch
  batches.push_back(random_batches("small_cnn", 64, 1, 19).front());  // and a full one again: replayed
  const CapturedRun captured = check_replays_match(program, batches, {.strategy = "mirrored", .devices = devices_of(DeviceKind::cpu_async, 2)});
  CHECK(captured.replays == static_cast<int64_t>(batches.size()) - 2);
}

TEST_CASE("CapturedSteps.a_step_that_a_replay_cannot_repeat_runs_as_usual_and_says_why") {
  const TrainingProgram program = build_program("small_cnn", ops::Optimizer::momentum_sgd(0.05, 0.9));
  const std::vector<Batch> batches = random_batches("small_cnn", 64, 4, 23);
  struct Case {
    CaptureSetup setup;
    std::string reason;
  };
  for (const Case& c : {Case{{.devices = {{DeviceKind::cpu, 0}}}, "every node of the step runs on the host"},
                        Case{{.deterministic = true}, "deterministic execution runs one node at a time, on the host"}}) {
    CAPTURE(c.reason);
    const CapturedRun captured = check_replays_match(program, batches, c.setup);
    CHECK(captured.replays == 0);
    REQUIRE(captured.refusals.size() == 1);
    CHECK(captured.refusals[0].find(c.reason) != std::string::npos);
  }
}

}  // namespace
}  // namespace mirra::strategies::test
