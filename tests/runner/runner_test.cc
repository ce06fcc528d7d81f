// The runner end to end on Fashion-MNIST: resume equals an uninterrupted run (also after SIGKILL while
// a checkpoint was being written), checkpoints restore across strategies and replica counts, gradient
// accumulation trains as larger batches do, sharded optimizer state trains as unsharded and checkpoints
// whole slots, mixed precision trains from the flag and fp16's loss scale is checkpointed, the JSON
// summary, metrics and trace, losses over more than the batch reported as one device reports them,
// and one-line errors with exit code 2 for bad input.
#include <doctest/doctest.h>

#include <signal.h>
#include <sys/stat.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <thread>

#include "serialization/checkpoint.h"
#include "tests/runner/runner_process.h"

namespace mirra::runner {

namespace {

namespace fs = std::filesystem;
using namespace test;

// The variables of the newest checkpoint in `dir`, which `replicas` replicas wrote.
std::map<std::string, graph::TensorValue> latest_checkpoint(const std::string& dir, int replicas) {
  std::vector<std::string> warnings;
  auto saved = serialization::CheckpointStore(dir, 3).load_latest(warnings);
  REQUIRE(saved.ok());
  REQUIRE(saved->has_value());
  CHECK((*saved)->replicas == replicas);
  std::map<std::string, graph::TensorValue> values;
  for (const auto& v : (*saved)->variables) values[v.name] = v.value;
  return values;
}

double max_difference(const std::map<std::string, graph::TensorValue>& a, const std::map<std::string, graph::TensorValue>& b) {
  REQUIRE(a.size() == b.size());
  double worst = 0;
  for (const auto& [name, value] : a) {
    const auto& other = b.at(name);
    REQUIRE(value.type == other.type);
    if (value.type.dtype != graph::DType::f32) continue;
    const auto x = value.values<float>();
    const auto y = other.values<float>();
    for (size_t i = 0; i < x.size(); ++i) worst = std::max(worst, static_cast<double>(std::fabs(x[i] - y[i])));
  }
  return worst;
}

}  // namespace

// With a warmup and cosine schedule, so the learning rate of each resumed step must be right too.
TEST_CASE("Runner.resume.matches_an_uninterrupted_run") {
  const std::string ckpt = workspace() / "resume_ckpt";
  const std::vector<std::string> schedule = {"--schedule", "cosine", "--warmup-steps", "4", "--decay-steps", "20"};
  auto with_schedule = [&schedule](std::vector<std::string> extra) {
    extra.insert(extra.end(), schedule.begin(), schedule.end());
    return train_args(extra);
  };
  const std::string metrics = workspace() / "resume_metrics.jsonl";
  REQUIRE(run(with_schedule({"--steps", "25", "--save", workspace() / "whole.mirra", "--metrics", metrics}), "whole").code == 0);
  std::ifstream lines(metrics);
  std::vector<double> rates;
  for (std::string line; std::getline(lines, line);) rates.push_back(nlohmann::json::parse(line)["learning_rate"].get<double>());
  REQUIRE(rates.size() == 25);
  CHECK(rates[0] == doctest::Approx(0.05 / 4));  // warmup from base / warmup_steps
  CHECK(rates[3] == doctest::Approx(0.05));
  CHECK(rates[24] == doctest::Approx(0.05 * 0.5 * (1 + std::cos(M_PI * 20.0 / 20.0))));  // decayed to alpha = 0
  REQUIRE(run(with_schedule({"--steps", "9", "--checkpoint-dir", ckpt}), "first_part").code == 0);
  const Run second = run(with_schedule({"--steps", "25", "--checkpoint-dir", ckpt, "--resume", "--save", workspace() / "resumed.mirra"}),
                         "second_part");
  REQUIRE(second.code == 0);
  CHECK(second.out.find("resumed from step 9") != std::string::npos);
  const auto whole = trained_values(workspace() / "whole.mirra");
  CHECK(whole == trained_values(workspace() / "resumed.mirra"));  // every bit, slots and step counter too
  CHECK(whole.contains("fc1/w/momentum"));
  CHECK(whole.at("optimizer/iterations").values<int64_t>()[0] == 25);
}

TEST_CASE("Runner.resume.across_strategies_and_replica_counts") {
  const std::string ckpt = workspace() / "cross_ckpt";
  REQUIRE(run(train_args({"--steps", "6", "--strategy", "mirrored", "--devices", "cpu:0,cpu:1", "--checkpoint-dir", ckpt}),
              "saved_by_two")
              .code == 0);
  const std::map<std::string, graph::TensorValue> checkpoint_values = latest_checkpoint(ckpt, 2);

  // Restored onto one device, untouched: the same bits.
  const std::string one = workspace() / "restored_one.mirra";
  const std::string ckpt_copy = workspace() / "cross_ckpt_copy";
  fs::copy(ckpt, ckpt_copy);
  REQUIRE(run(train_args({"--steps", "6", "--strategy", "one_device", "--checkpoint-dir", ckpt_copy, "--resume", "--save", one}),
              "restored_one")
              .code == 0);
  CHECK(trained_values(one) == checkpoint_values);

  // Continued on three replicas and under CentralStorage: the same training as one device, to float
  // tolerance (the sums run in other orders).
  const std::string reference = workspace() / "reference.mirra";
  REQUIRE(run(train_args({"--steps", "12", "--strategy", "one_device", "--save", reference}), "reference").code == 0);
  for (const std::vector<std::string>& strategy : {std::vector<std::string>{"--strategy", "mirrored", "--devices", "cpu:0,cpu:1,cpu:2"},
                                                   std::vector<std::string>{"--strategy", "central_storage"}}) {
    CAPTURE(strategy[1]);
    const std::string dir = workspace() / ("cross_" + strategy[1]);
    fs::copy(ckpt, dir);
    const std::string out = workspace() / ("continued_" + strategy[1] + ".mirra");
    std::vector<std::string> extra = {"--steps", "12", "--checkpoint-dir", dir, "--resume", "--save", out};
    extra.insert(extra.end(), strategy.begin(), strategy.end());
    REQUIRE(run(train_args(extra), "continued_" + strategy[1]).code == 0);
    CHECK(max_difference(trained_values(out), trained_values(reference)) < 1e-5);
  }
}

// A ResNet trained on three replicas, with synchronised batch normalisation or per replica (each
// replica's moving statistics its own until they are averaged on read), keeps one value of each
// moving statistic in its checkpoint, which restores bit for bit onto one device and onto four
// replicas.
namespace {
void check_batch_norm_statistics_restore(bool sync) {
  const std::string tag = sync ? "sync" : "per_replica";
  const std::string ckpt = workspace() / ("resnet_ckpt_" + tag);
  std::vector<std::string> common = {"train", resnet20_file(), "--deterministic", "--threads", "2", "--batch-size", "30",
                                     "--steps", "3"};
  if (sync) common.push_back("--sync-batch-norm");
  const auto with = [&](std::vector<std::string> extra) {
    extra.insert(extra.begin(), common.begin(), common.end());
    return extra;
  };
  REQUIRE(run(with({"--strategy", "mirrored", "--devices", "cpu:0,cpu:1,cpu:2", "--checkpoint-dir", ckpt}), "resnet_three").code == 0);
  const std::map<std::string, graph::TensorValue> checkpoint_values = latest_checkpoint(ckpt, 3);
  REQUIRE(checkpoint_values.contains("stem/bn/moving_variance"));
  const std::span<const float> variance = checkpoint_values.at("stem/bn/moving_variance").values<float>();
  CHECK(std::any_of(variance.begin(), variance.end(), [](float v) { return v != 1.0f; }));  // moved from its start
  for (const auto& target : {std::pair<std::string, std::string>{"one", "cpu:0"}, {"four", "cpu:0,cpu:1,cpu:2,cpu:3"}}) {
    const std::string& name = target.first;  // a structured binding cannot be captured by CAPTURE with clang 14
    const std::string& replicas = target.second;
    CAPTURE(name);
    const std::string dir = workspace() / ("resnet_ckpt_" + tag + "_" + name),
                      out = workspace() / ("resnet_restored_" + tag + "_" + name + ".mirra");
    fs::copy(ckpt, dir);
    const std::vector<std::string> strategy = name == "one" ? std::vector<std::string>{"--strategy", "one_device"}
                                                            : std::vector<std::string>{"--strategy", "mirrored", "--devices", replicas};
    std::vector<std::string> extra = {"--checkpoint-dir", dir, "--resume", "--save", out};
    extra.insert(extra.end(), strategy.begin(), strategy.end());
    REQUIRE(run(with(extra), "resnet_restored_" + name).code == 0);
    CHECK(trained_values(out) == checkpoint_values);  // every bit, the moving statistics too
  }
}
}  // namespace

TEST_CASE("Runner.resume.batch_norm_statistics_restore_into_any_replica_count") {
  for (const bool sync : {true, false}) {
    CAPTURE(sync);
    check_batch_norm_statistics_restore(sync);
  }
}

// Gradient accumulation from the command line: 4 batches of 32 per step train as batches of 128 do
// (one device and Mirrored), steps count updates, the accumulators stay out of the saved model, and a
// resume from a checkpoint between updates continues bit for bit.
TEST_CASE("Runner.accumulation_steps.train_as_k_times_larger_batches") {
  // train_args' batches hold 32 examples.
  const std::string reference = workspace() / "batches_of_128.mirra";
  REQUIRE(run({"train", mlp_file(), "--deterministic", "--threads", "2", "--batch-size", "128", "--steps", "8", "--strategy",
               "one_device", "--save", reference},
              "batches_of_128")
              .code == 0);
  const std::vector<std::string> accumulate = {"--accumulation-steps", "4"};
  for (const std::string strategy : {"one_device", "mirrored"}) {
    CAPTURE(strategy);
    const std::string out = workspace() / ("accumulated_" + strategy + ".mirra");
    std::vector<std::string> extra = {"--steps", "8", "--strategy", strategy, "--save", out, "--json"};
    extra.insert(extra.end(), accumulate.begin(), accumulate.end());
    const Run trained = run(train_args(extra), "accumulated_" + strategy);
    REQUIRE(trained.code == 0);
    const auto summary = nlohmann::json::parse(last_line(trained.out));
    CHECK(summary["steps"] == 8);
    CHECK(summary["examples"] == 8 * 128);
    const auto values = trained_values(out);
    CHECK(values.at("optimizer/iterations").values<int64_t>()[0] == 8);
    CHECK(max_difference(values, trained_values(reference)) < 1e-5);  // the same names: no accumulators
  }
  const std::string ckpt = workspace() / "accumulation_ckpt";
  std::vector<std::string> first = {"--steps", "5", "--strategy", "mirrored", "--checkpoint-dir", ckpt};
  first.insert(first.end(), accumulate.begin(), accumulate.end());
  REQUIRE(run(train_args(first), "accumulated_first_part").code == 0);
  const std::string resumed = workspace() / "accumulated_resumed.mirra";
  std::vector<std::string> second = {"--steps", "8", "--strategy", "mirrored", "--checkpoint-dir", ckpt, "--resume", "--save", resumed};
  second.insert(second.end(), accumulate.begin(), accumulate.end());
  REQUIRE(run(train_args(second), "accumulated_second_part").code == 0);
  CHECK(trained_values(resumed) == trained_values(workspace() / "accumulated_mirrored.mirra"));
}

// Sharded optimizer state from the command line: Mirrored over 3 replicas with
// --shard-optimizer-state trains as unsharded Mirrored does; its model file and checkpoints hold the
// whole slots, which restore unsharded, onto one device, and sharded again (bit for bit against the
// uninterrupted sharded run); an unsharded checkpoint restores sharded.
TEST_CASE("Runner.shard_optimizer_state.trains_and_checkpoints_whole_slots") {
  const std::vector<std::string> three = {"--strategy", "mirrored", "--devices", "cpu:0,cpu:1,cpu:2"};
  const std::vector<std::string> sharded = {"--strategy", "mirrored", "--devices", "cpu:0,cpu:1,cpu:2", "--shard-optimizer-state"};
  const auto args = [](std::vector<std::string> extra, const std::vector<std::string>& strategy) {
    extra.insert(extra.end(), strategy.begin(), strategy.end());
    return train_args(extra);
  };
  const std::string reference = workspace() / "unsharded.mirra";
  REQUIRE(run(args({"--steps", "12", "--save", reference}, three), "unsharded").code == 0);
  const std::string whole = workspace() / "sharded.mirra";
  const Run trained = run(args({"--steps", "12", "--save", whole}, sharded), "sharded");
  REQUIRE(trained.code == 0);
  CHECK(trained.out.find("optimizer state sharded (3 replicas)") != std::string::npos);
  const auto want = trained_values(reference);
  CHECK(want.contains("fc1/w/momentum"));
  CHECK(max_difference(trained_values(whole), want) < 1e-5);  // the same names, types and whole slots

  const std::string ckpt = workspace() / "sharded_ckpt";
  REQUIRE(run(args({"--steps", "6", "--checkpoint-dir", ckpt}, sharded), "sharded_first_part").code == 0);
  struct Resume {
    std::string tag;
    std::vector<std::string> strategy;
  };
  for (const Resume& resume : {Resume{"sharded", sharded}, Resume{"unsharded", {"--strategy", "mirrored"}},
                               Resume{"one_device", {"--strategy", "one_device"}}}) {
    CAPTURE(resume.tag);
    const std::string dir = workspace() / ("sharded_ckpt_" + resume.tag);
    fs::copy(ckpt, dir);
    const std::string out = workspace() / ("resumed_" + resume.tag + ".mirra");
    REQUIRE(run(args({"--steps", "12", "--checkpoint-dir", dir, "--resume", "--save", out}, resume.strategy), "resumed_" + resume.tag).code == 0);
    if (resume.tag == "sharded") {
      CHECK(trained_values(out) == trained_values(whole));
    } else {
      CHECK(max_difference(trained_values(out), want) < 1e-5);
    }
  }
  const std::string unsharded_ckpt = workspace() / "unsharded_ckpt";
  REQUIRE(run(args({"--steps", "6", "--checkpoint-dir", unsharded_ckpt}, three), "unsharded_first_part").code == 0);
  const std::string out = workspace() / "resumed_sharded_from_unsharded.mirra";
  REQUIRE(run(args({"--steps", "12", "--checkpoint-dir", unsharded_ckpt, "--resume", "--save", out}, sharded), "sharded_second_part").code == 0);
  CHECK(max_difference(trained_values(out), want) < 1e-5);

  const Run printed = run({"config", "--print", "--shard-optimizer-state"}, "printed_sharded");
  REQUIRE(printed.code == 0);
  CHECK(nlohmann::json::parse(printed.out)["shard_optimizer_state"] == true);
}

// Mixed precision from the command line: bf16 and fp16 train close to f32; fp16's loss scale is in the
// checkpoints and the saved model, a resume continues bit for bit, and the saved model trains on in f32
// (the loss scale is ignored there) and back in fp16.
TEST_CASE("Runner.mixed_precision.trains_and_checkpoints_the_loss_scale") {
  const auto final_loss = [](const Run& r) {
    return nlohmann::json::parse(last_line(r.out))["final_loss"].get<double>();
  };
  const Run f32 = run(train_args({"--steps", "12", "--json"}), "mixed_f32");
  REQUIRE(f32.code == 0);
  for (const std::string mode : {"bf16", "fp16"}) {
    CAPTURE(mode);
    const std::string out = workspace() / ("mixed_" + mode + ".mirra");
    const Run trained = run(train_args({"--steps", "12", "--mixed-precision", mode, "--save", out, "--json"}), "mixed_" + mode);
    REQUIRE(trained.code == 0);
    CHECK(final_loss(trained) == doctest::Approx(final_loss(f32)).epsilon(0.05));
    CHECK(trained_values(out).contains("loss_scale/scale") == (mode == "fp16"));
    const auto summary = nlohmann::json::parse(last_line(trained.out));
    CHECK(summary.contains("loss_scale") == (mode == "fp16"));
    if (mode == "fp16") {  // 2^15 at first, halved by each skipped step, and 12 steps are too few to grow
      CHECK(summary["loss_scale"].get<double>() == std::ldexp(32768.0, -summary["skipped_steps"].get<int>()));
    }
  }
  const std::string ckpt = workspace() / "fp16_ckpt";
  REQUIRE(run(train_args({"--steps", "5", "--mixed-precision", "fp16", "--checkpoint-dir", ckpt}), "fp16_first_part").code == 0);
  std::vector<std::string> warnings;
  auto saved = serialization::CheckpointStore(ckpt, 3).load_latest(warnings);
  REQUIRE(saved.ok());
  REQUIRE(saved->has_value());
  bool has_scale = false;
  for (const auto& v : (*saved)->variables) has_scale = has_scale || v.name == "loss_scale/scale";
  CHECK(has_scale);
  const std::string resumed = workspace() / "fp16_resumed.mirra";
  REQUIRE(run(train_args({"--steps", "12", "--mixed-precision", "fp16", "--checkpoint-dir", ckpt, "--resume", "--save", resumed}),
              "fp16_second_part")
              .code == 0);
  CHECK(trained_values(resumed) == trained_values(workspace() / "mixed_fp16.mirra"));
  for (const std::string mode : {"off", "fp16"}) {
    CAPTURE(mode);
    CHECK(run({"train", workspace() / "mixed_fp16.mirra", "--steps", "2", "--mixed-precision", mode}, "from_fp16_" + mode).code == 0);
  }
  // fp16 with gradient accumulation: 2 batches of 32 per step train close to f32 on batches of 64.
  const Run f32_64 = run({"train", mlp_file(), "--deterministic", "--threads", "2", "--batch-size", "64", "--steps", "12", "--json"},
                         "f32_batches_of_64");
  REQUIRE(f32_64.code == 0);
  const Run accumulated = run(train_args({"--steps", "12", "--mixed-precision", "fp16", "--accumulation-steps", "2", "--json"}),
                              "fp16_accumulated");
  REQUIRE(accumulated.code == 0);
  CHECK(final_loss(accumulated) == doctest::Approx(final_loss(f32_64)).epsilon(0.05));
}

// The first run checkpoints after every step and is killed with SIGKILL while a checkpoint file is
// being written; the resumed run must end exactly where an uninterrupted one does.
TEST_CASE("Runner.resume.after_sigkill_while_writing_a_checkpoint") {
  const std::string ckpt = workspace() / "killed_ckpt";
  const int64_t steps = 300;
  const Process victim = spawn(train_args({"--steps", std::to_string(steps), "--checkpoint-dir", ckpt, "--checkpoint-every", "1"}),
                               "victim");
  bool killed_mid_write = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (!killed_mid_write && std::chrono::steady_clock::now() < deadline) {
    size_t complete = 0;
    bool writing = false;
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(ckpt, ec)) {
      const std::string name = entry.path().filename().string();
      complete += name.ends_with(".mirrackpt") && !name.starts_with(".");
      writing |= name.find(".tmp-") != std::string::npos;
    }
    if (complete >= 2 && writing) {
      ::kill(victim.pid, SIGKILL);
      killed_mid_write = true;
    }
  }
  if (!killed_mid_write) ::kill(victim.pid, SIGKILL);
  CHECK(wait_for(victim) == 128 + SIGKILL);
  REQUIRE(killed_mid_write);

  const Run resumed = run(train_args({"--steps", std::to_string(steps), "--checkpoint-dir", ckpt, "--resume", "--save",
                                      workspace() / "after_kill.mirra"}),
                          "after_kill");
  REQUIRE(resumed.code == 0);
  CHECK(resumed.out.find("resumed from step") != std::string::npos);
  REQUIRE(run(train_args({"--steps", std::to_string(steps), "--save", workspace() / "never_killed.mirra"}), "never_killed").code == 0);
  CHECK(trained_values(workspace() / "after_kill.mirra") == trained_values(workspace() / "never_killed.mirra"));
}

// SIGTERM (or Ctrl-C's SIGINT) ends training after the current step with a checkpoint of that step.
TEST_CASE("Runner.sigterm_checkpoints_the_last_step_and_exits_143") {
  const std::string ckpt = workspace() / "sigterm_ckpt";
  const Process p = spawn(train_args({"--steps", "1000000", "--checkpoint-dir", ckpt, "--checkpoint-every", "50"}), "sigterm");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (serialization::CheckpointStore(ckpt, 3).list().empty() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ::kill(p.pid, SIGTERM);
  CHECK(wait_for(p) == 128 + SIGTERM);
  const std::string err = read_text(p.err);
  const size_t at = err.find("interrupted after step ");
  REQUIRE(at != std::string::npos);
  const int64_t interrupted_step = std::stoll(err.substr(at + std::strlen("interrupted after step ")));
  std::vector<std::string> warnings;
  auto latest = serialization::CheckpointStore(ckpt, 3).load_latest(warnings);
  REQUIRE(latest.ok());
  REQUIRE(latest->has_value());
  CHECK((*latest)->position.step == interrupted_step);  // the interrupted step's own checkpoint
  const Run resumed = run(train_args({"--steps", std::to_string((*latest)->position.step + 2), "--checkpoint-dir", ckpt,
                                      "--resume", "--json"}),
                          "after_sigterm");
  REQUIRE(resumed.code == 0);
  CHECK(nlohmann::json::parse(last_line(resumed.out))["steps"] == 2);
}

// Signals at any moment (loading, mid-step, between steps) end the run cleanly with 128 + signal. A
// signal handler that ran on a compute thread once corrupted memory in about one run in seven.
TEST_CASE("Runner.signals_at_any_moment_never_crash") {
  for (int trial = 0; trial < 12; ++trial) {
    CAPTURE(trial);
    const Process p = spawn(train_args({"--steps", "1000000"}), "signal_" + std::to_string(trial));
    std::this_thread::sleep_for(std::chrono::milliseconds(40 * trial));
    const int signal = trial % 2 == 0 ? SIGTERM : SIGINT;
    ::kill(p.pid, signal);
    CHECK(wait_for(p) == 128 + signal);
  }
}

// A signal while the run is still loading ends it at once, also when loading is blocked: here on
// data files that are FIFOs nobody writes to.
TEST_CASE("Runner.signals_while_loading_end_the_process_at_once") {
  const std::string data = workspace() / "fifo_data";
  fs::create_directories(data);
  for (const char* name : {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"}) {
    REQUIRE(::mkfifo((data + "/" + name).c_str(), 0644) == 0);
  }
  const Process p = spawn(train_args({"--steps", "1", "--data", data}), "signal_while_loading");
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ::kill(p.pid, SIGTERM);
  const std::optional<int> code = wait_for(p, std::chrono::seconds(20));
  REQUIRE_MESSAGE(code.has_value(), "the signal was held until loading finished, which it never does");
  CHECK(*code == 128 + SIGTERM);
}

TEST_CASE("Runner.resume.skips_a_corrupted_newest_checkpoint_with_a_warning") {
  const std::string ckpt = workspace() / "corrupt_ckpt";
  REQUIRE(run(train_args({"--steps", "8", "--checkpoint-dir", ckpt, "--checkpoint-every", "4"}), "corrupt_first").code == 0);
  const auto paths = serialization::CheckpointStore(ckpt, 3).list();
  REQUIRE(paths.size() == 2);
  fs::resize_file(paths.back(), fs::file_size(paths.back()) / 3);
  const Run resumed = run(train_args({"--steps", "8", "--checkpoint-dir", ckpt, "--resume"}), "corrupt_resume");
  REQUIRE(resumed.code == 0);
  CHECK(resumed.err.find("warning") != std::string::npos);
  CHECK(resumed.err.find("ckpt-0000000008") != std::string::npos);
  CHECK(resumed.out.find("resumed from step 4") != std::string::npos);
}

TEST_CASE("Runner.resume.with_another_batch_size_continues_at_the_same_example") {
  const std::string ckpt = workspace() / "batch_ckpt";
  REQUIRE(run(train_args({"--steps", "6", "--checkpoint-dir", ckpt}), "batch_first").code == 0);
  const Run resumed = run({"train", mlp_file(), "--steps", "8", "--batch-size", "64", "--checkpoint-dir", ckpt, "--resume", "--json"},
                          "batch_resume");
  REQUIRE(resumed.code == 0);
  CHECK(resumed.err.find("counts batches of 32; continuing with 64 from example 192") != std::string::npos);
  const auto summary = nlohmann::json::parse(last_line(resumed.out));
  CHECK(summary["steps"] == 2);
  CHECK(summary["total_steps"] == 8);
  CHECK(summary["examples"] == 128);
}

// A loss over [batch, classes] plus a weight decay, on a batch that splits unevenly: every strategy
// reports the losses one device reports, and `mirra train --eval` and `mirra eval` agree on the model
// it saved.
TEST_CASE("Runner.every_strategy_reports_a_loss_over_batch_and_classes_as_one_device") {
  const std::vector<std::string> common = {"train", brier_mlp_file(), "--steps", "8", "--batch-size", "61", "--threads", "2"};
  const auto train = [&](const std::string& tag, std::vector<std::string> extra) {
    std::vector<std::string> args = common;
    args.insert(args.end(), {"--metrics", workspace() / (tag + ".jsonl")});
    args.insert(args.end(), extra.begin(), extra.end());
    const Run r = run(args, tag);
    REQUIRE_MESSAGE(r.code == 0, r.err);
    return std::pair{step_losses(workspace() / (tag + ".jsonl")), r};
  };
  const auto [reference, unused] = train("brier_one_device", {"--strategy", "one_device", "--devices", "cpu:0"});
  REQUIRE(reference.size() == 8);
  const std::string saved = workspace() / "brier_mirrored.mirra";
  const std::vector<std::pair<std::string, std::vector<std::string>>> runs = {
      {"mirrored", {"--strategy", "mirrored", "--devices", "cpu:0,cpu:1,cpu:2", "--eval", "--json", "--save", saved}},
      {"central_storage", {"--strategy", "central_storage", "--devices", "cpu:0,cpu:1"}}};
  for (const auto& entry : runs) {
    const std::string& strategy = entry.first;  // not a structured binding: CAPTURE's lambda takes it
    CAPTURE(strategy);
    const auto [losses, r] = train("brier_" + strategy, entry.second);
    REQUIRE(losses.size() == reference.size());
    for (size_t step = 0; step < losses.size(); ++step) {
      CAPTURE(step);
      CHECK(losses[step] == doctest::Approx(reference[step]).epsilon(1e-4));
    }
    if (strategy != "mirrored") continue;
    const double trained = nlohmann::json::parse(last_line(r.out))["test_loss"].get<double>();
    const Run eval = run({"eval", saved, "--json"}, "brier_eval");
    REQUIRE_MESSAGE(eval.code == 0, eval.err);
    CHECK(nlohmann::json::parse(last_line(eval.out))["test_loss"].get<double>() == doctest::Approx(trained).epsilon(1e-5));
  }
}

// A model file whose train step writes state from the batch (tests/runner/runner_process.h's
// stats_mlp_file): Mirrored over 2 and 4 devices and CentralStorage over 2 save the state one device
// saves (a variable synchronised on read too, which Mirrored's replicas average only before saving),
// and `mirra inspect` shows the aggregations and the state updates.
TEST_CASE("Runner.state_updates_of_a_model_file_train_as_one_device_under_every_strategy") {
  const std::vector<std::string> common = {"train", stats_mlp_file(), "--steps", "4", "--batch-size", "64", "--threads", "2"};
  const auto trained = [&](const std::string& tag, const std::vector<std::string>& extra) {
    std::vector<std::string> args = common;
    args.insert(args.end(), extra.begin(), extra.end());
    args.insert(args.end(), {"--save", workspace() / (tag + ".mirra")});
    const Run r = run(args, tag);
    REQUIRE_MESSAGE(r.code == 0, r.err);
    return trained_values(workspace() / (tag + ".mirra"));
  };
  const auto want = trained("stats_one_device", {"--strategy", "one_device", "--devices", "cpu:0"});
  CHECK(want.at("stats/images_seen").values<float>()[0] == 256);
  const std::vector<std::pair<std::string, std::vector<std::string>>> runs = {
      {"mirrored_2", {"--strategy", "mirrored", "--devices", "cpu:0,cpu:1"}},
      {"mirrored_4", {"--strategy", "mirrored", "--devices", "cpu:0,cpu:1,cpu:2,cpu:3"}},
      {"central_storage_2", {"--strategy", "central_storage", "--devices", "cpu:0,cpu:1"}}};
  for (const auto& entry : runs) {
    const std::string& tag = entry.first;  // not a structured binding: CAPTURE's lambda takes it
    CAPTURE(tag);
    check_close(trained("stats_" + tag, entry.second), want, 1e-5);
  }
  const Run inspect = run({"inspect", stats_mlp_file()}, "stats_inspect");
  REQUIRE(inspect.code == 0);
  CHECK(inspect.out.find("stats/mean_image: f32[28,28,1], aggregation mean\n") != std::string::npos);
  CHECK(inspect.out.find("stats/mean_image_on_read: f32[28,28,1], aggregation mean, synchronized on read\n") !=
        std::string::npos);
  CHECK(inspect.out.find(", state update stats/Assign, state update stats/Assign_1") != std::string::npos);
}

// A loss averaged over a declared weight (the examples not labelled 9), on a batch that splits
// unevenly: Mirrored over 3 and CentralStorage over 2 report the losses one device reports and save
// its variables, `mirra eval` reports the test set's loss over its weight whatever the batch size,
// and `mirra inspect` names the weight.
TEST_CASE("Runner.a_loss_over_a_declared_weight_trains_as_one_device_under_every_strategy") {
  const std::vector<std::string> common = {"train", masked_mlp_file(), "--steps", "6", "--batch-size", "61", "--threads", "2"};
  const auto trained = [&](const std::string& tag, const std::vector<std::string>& extra) {
    std::vector<std::string> args = common;
    args.insert(args.end(), extra.begin(), extra.end());
    args.insert(args.end(), {"--metrics", workspace() / (tag + ".jsonl"), "--save", workspace() / (tag + ".mirra")});
    const Run r = run(args, tag);
    REQUIRE_MESSAGE(r.code == 0, r.err);
    return std::pair{step_losses(workspace() / (tag + ".jsonl")), trained_values(workspace() / (tag + ".mirra"))};
  };
  const auto metric = [&](const std::string& tag, const std::string& name) {
    return step_metric(workspace() / (tag + ".jsonl"), name);
  };
  const auto [want_losses, want] = trained("masked_one_device", {"--strategy", "one_device", "--devices", "cpu:0"});
  REQUIRE(want_losses.size() == 6);
  const std::vector<double> want_kept = metric("masked_one_device", "kept");
  const std::vector<double> want_accuracy = metric("masked_one_device", "kept_accuracy");
  const std::vector<std::pair<std::string, std::vector<std::string>>> runs = {
      {"mirrored_3", {"--strategy", "mirrored", "--devices", "cpu:0,cpu:1,cpu:2"}},
      {"central_storage_2", {"--strategy", "central_storage", "--devices", "cpu:0,cpu:1"}}};
  for (const auto& entry : runs) {
    const std::string& tag = entry.first;  // not a structured binding: CAPTURE's lambda takes it
    CAPTURE(tag);
    const auto [losses, got] = trained("masked_" + tag, entry.second);
    REQUIRE(losses.size() == want_losses.size());
    const std::vector<double> kept = metric("masked_" + tag, "kept"), accuracy = metric("masked_" + tag, "kept_accuracy");
    for (size_t step = 0; step < losses.size(); ++step) {
      CAPTURE(step);
      CHECK(losses[step] == doctest::Approx(want_losses[step]).epsilon(1e-4));
      CHECK(kept[step] == want_kept[step]);
      CHECK(accuracy[step] == doctest::Approx(want_accuracy[step]).epsilon(1e-6));
    }
    check_close(got, want, 1e-4);
  }
  // The test set's loss is a mean over its weight, whatever the batches (a batch of one example
  // labelled 9 weighs nothing).
  std::vector<nlohmann::json> evaluations;
  for (const char* batch : {"1", "7", "1000"}) {
    const Run eval = run({"eval", workspace() / "masked_mirrored_3.mirra", "--json", "--batch-size", batch}, "masked_eval");
    REQUIRE_MESSAGE(eval.code == 0, eval.err);
    evaluations.push_back(nlohmann::json::parse(last_line(eval.out)));
  }
  for (const nlohmann::json& e : evaluations) {
    CHECK(e["test_loss"].get<double>() == doctest::Approx(evaluations[2]["test_loss"].get<double>()).epsilon(1e-5));
    CHECK(e["test_metrics"]["kept_accuracy"].get<double>() ==
          doctest::Approx(evaluations[2]["test_metrics"]["kept_accuracy"].get<double>()).epsilon(1e-6));
    CHECK(e["test_metrics"]["kept"] == 9000);  // Fashion-MNIST's test split: 1,000 examples of each class
  }
  const Run inspect = run({"inspect", masked_mlp_file()}, "masked_inspect");
  REQUIRE(inspect.code == 0);
  CHECK(inspect.out.find(", loss weight ReduceSum") != std::string::npos);
  CHECK(inspect.out.find(", metric kept_accuracy = Div_1 (mean over ReduceSum)") != std::string::npos);
}

TEST_CASE("Runner.json_metrics_and_trace") {
  const std::string metrics = workspace() / "metrics.jsonl";
  const std::string trace = workspace() / "trace.json";
  const Run r = run({"train", mlp_file(), "--steps", "5", "--batch-size", "64", "--eval", "--json", "--metrics", metrics,
                     "--trace", trace},
                    "json");
  REQUIRE(r.code == 0);
  const auto summary = nlohmann::json::parse(last_line(r.out));
  for (const char* key : {"strategy", "devices", "replicas", "steps", "examples", "seconds", "examples_per_s", "final_loss",
                          "test_accuracy"}) {
    CHECK_MESSAGE(summary.contains(key), key);
  }
  CHECK(summary["strategy"] == "mirrored");
  CHECK(summary["replicas"] == 2);
  CHECK(summary["steps"] == 5);
  CHECK(summary["examples"] == 320);
  CHECK(summary["test_accuracy"].get<double>() > 0.2);

  std::ifstream lines(metrics);
  std::string line, last;
  int count = 0;
  std::vector<double> waits;  // for each step's batch, in ms
  while (std::getline(lines, line)) {
    last = line;
    ++count;
    waits.push_back(nlohmann::json::parse(line).at("data_wait_ms").get<double>());
  }
  CHECK(count == 5);
  CHECK(std::all_of(waits.begin(), waits.end(), [](double ms) { return ms >= 0; }));
  // The summary's loss is the last step's, digit for digit: numbers keep full precision.
  CHECK(nlohmann::json::parse(last)["loss"].get<double>() == summary["final_loss"].get<double>());

  std::ifstream trace_file(trace);
  const auto trace_json = nlohmann::json::parse(trace_file);
  // The trace says where the gradients were summed, as the summary does.
  CHECK(trace_json["otherData"]["all_reduce"] == summary["all_reduce"]);
  CHECK(summary["all_reduce"].get<std::string>().starts_with("host: cpu:0 | cpu:1"));
  const auto& events = trace_json["traceEvents"];
  std::map<std::string, int> tracks;  // by name: tid
  std::set<std::string> categories;
  for (const auto& e : events) {
    if (e["ph"] == "M" && e["name"] == "thread_name") tracks[e["args"]["name"].get<std::string>()] = e["tid"].get<int>();
    if (e["ph"] == "X") categories.insert(e["cat"].get<std::string>());
  }
  // The host path's all-reduce is one node, on the first replica's device; collectives have a track
  // of their own (a GPU's communication stream), apart from the kernels.
  for (const char* t : {"device cpu:0", "device cpu:1", "device cpu:0 communication", "input pipeline", "steps"}) {
    CHECK_MESSAGE(tracks.contains(t), t);
  }
  for (const char* c : {"kernel", "collective", "data", "step", "wait"}) CHECK_MESSAGE(categories.contains(c), c);
  // The input pipeline's track holds each step's wait for its batch, as the metrics file has it.
  std::vector<double> traced_waits;
  for (const auto& e : events) {
    if (e["ph"] == "X" && e["name"] == "wait for batch") traced_waits.push_back(e["dur"].get<double>() / 1e3);
  }
  REQUIRE(traced_waits.size() == waits.size());
  for (size_t i = 0; i < waits.size(); ++i) CHECK(traced_waits[i] == doctest::Approx(waits[i]).epsilon(1e-6));
  for (const auto& e : events) {
    if (e["ph"] != "X") continue;
    const bool on_communication = e["tid"] == tracks["device cpu:0 communication"];
    if (e["cat"] == "collective") CHECK(on_communication);
    if (e["cat"] == "kernel") CHECK_FALSE(on_communication);
  }
}

// --profile: where the steps' time went, by op and by device, from the executor's timeline: every
// step but the first, the ops' shares summing to the whole, the host path's all-reduce on cpu:0's
// collective time, the slowest nodes in order; the terminal gets the same as tables.
TEST_CASE("Runner.profile_says_where_the_steps'_time_went") {
  const Run r = run({"train", mlp_file(), "--steps", "4", "--batch-size", "64", "--json", "--profile"}, "profile");
  REQUIRE(r.code == 0);
  const auto profile = nlohmann::json::parse(last_line(r.out)).at("profile");
  CHECK(profile["steps"] == 3);
  CHECK(profile["first_step_left_out"] == true);
  CHECK(profile["step_ms"].get<double>() > 0);
  double shares = 0;
  std::set<std::string> ops;
  for (const auto& op : profile["by_op"]) {
    shares += op["share"].get<double>();
    ops.insert(op["op"].get<std::string>());
    CHECK(op["nodes"].get<int>() >= 1);
  }
  CHECK(shares == doctest::Approx(1.0).epsilon(1e-9));
  for (const char* op : {"MatMul", "AllReduce", "ApplyMomentum"}) CHECK_MESSAGE(ops.contains(op), op);
  std::map<std::string, nlohmann::json> devices;
  for (const auto& d : profile["by_device"]) devices[d["device"].get<std::string>()] = d;
  REQUIRE(devices.size() == 2);
  CHECK(devices["cpu:0"]["compute_ms"].get<double>() > 0);
  CHECK(devices["cpu:1"]["compute_ms"].get<double>() > 0);
  CHECK(devices["cpu:0"]["collective_ms"].get<double>() > 0);
  CHECK(devices["cpu:1"]["collective_ms"].get<double>() == 0);
  CHECK(devices["cpu:0"]["exposed_communication_ms"].get<double>() <= devices["cpu:0"]["collective_ms"].get<double>());
  const auto& slowest = profile["slowest_nodes"];
  REQUIRE(slowest.size() == 5);
  for (size_t i = 1; i < slowest.size(); ++i) CHECK(slowest[i - 1]["ms"].get<double>() >= slowest[i]["ms"].get<double>());

  const Run text = run({"train", mlp_file(), "--steps", "3", "--batch-size", "64", "--profile"}, "profile_text");
  REQUIRE(text.code == 0);
  for (const char* line : {"profile of 2 steps (means per step; the first step, which builds the plans, left out)",
                           "  op ", "  device ", "  executor: ", " slowest nodes\n"}) {
    CHECK_MESSAGE(text.out.find(line) != std::string::npos, line);
  }
}

// Replicas on asynchronous devices (streams and memory of their own, copies inserted) train exactly as
// replicas on logical CPU devices, and their checkpoints restore anywhere.
TEST_CASE("Runner.cpu_async_devices.train_as_cpu_devices_do") {
  const std::string on_cpu = workspace() / "on_cpu.mirra";
  const std::string on_async = workspace() / "on_async.mirra";
  REQUIRE(run(train_args({"--steps", "5", "--deterministic", "--devices", "cpu:0,cpu:1", "--save", on_cpu}), "on_cpu").code == 0);
  const std::string trace = workspace() / "on_async.trace.json";
  const Run async = run(train_args({"--steps", "5", "--deterministic", "--devices", "cpu_async:0,cpu_async:1", "--save", on_async,
                                    "--checkpoint-dir", workspace() / "async_ckpt", "--trace", trace}),
                        "on_async");
  REQUIRE(async.code == 0);
  CHECK(async.out.find("cpu_async:0, cpu_async:1") != std::string::npos);
  CHECK(trained_values(on_async) == trained_values(on_cpu));
  // Each device's kernels, collectives and copies from the host have their tracks, as a GPU's
  // compute, communication and copy streams do.
  std::ifstream trace_file(trace);
  const auto trace_json = nlohmann::json::parse(trace_file);
  std::set<std::string> tracks;
  for (const auto& e : trace_json["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "thread_name") tracks.insert(e["args"]["name"].get<std::string>());
  }
  for (const char* device : {"cpu_async:0", "cpu_async:1"}) {
    for (const char* stream : {"", " communication", " copies"}) {
      const std::string name = "device " + std::string(device) + stream;
      CHECK_MESSAGE(tracks.contains(name), name);
    }
  }
  const std::string resumed = workspace() / "async_resumed_on_cpu.mirra";
  REQUIRE(run(train_args({"--steps", "5", "--deterministic", "--devices", "cpu:0", "--strategy", "one_device", "--checkpoint-dir",
                          workspace() / "async_ckpt", "--resume", "--save", resumed}),
              "async_resumed")
              .code == 0);
  CHECK(trained_values(resumed) == trained_values(on_async));

  // Mixed precision too: bf16's and fp16's casts and 16-bit products run there as on cpu devices,
  // and so does fp16's loss scaling, whose overflow verdict each device's updates read in host memory
  // (on a GPU, through a copy from the device, as here).
  for (const std::string mode : {"bf16", "fp16"}) {
    CAPTURE(mode);
    const std::string cpu_file = workspace() / (mode + "_on_cpu.mirra"), async_file = workspace() / (mode + "_on_async.mirra");
    REQUIRE(run(train_args({"--steps", "5", "--mixed-precision", mode, "--devices", "cpu:0,cpu:1", "--save", cpu_file}),
                mode + "_on_cpu")
                .code == 0);
    REQUIRE(run(train_args({"--steps", "5", "--mixed-precision", mode, "--devices", "cpu_async:0,cpu_async:1", "--save",
                            async_file}),
                mode + "_on_async")
                .code == 0);
    CHECK(trained_values(async_file) == trained_values(cpu_file));
  }
}

// A device the machine does not have is no bad input: exit 1 with the reason.
TEST_CASE("Runner.unavailable_device.exit_code_1_with_the_reason") {
  const Run r = run({"train", mlp_file(), "--devices", "gpu:0,gpu:1", "--steps", "1"}, "unavailable");
  CHECK(r.code == 1);
  CHECK(r.err.find("mirra: error (unavailable): strategy mirrored: device gpu:0 is not available (") != std::string::npos);
}

TEST_CASE("Runner.bad_input.one_line_error_and_exit_code_2") {
  const std::string bad_config = workspace() / "bad.json";
  std::ofstream(bad_config) << R"({"strategy": "mirrored", "training": {"epoch": 3}})";
  const std::string not_a_model = workspace() / "not_a_model.mirra";
  std::ofstream(not_a_model) << "this is not a model";
  auto config_file = [](const std::string& name, const std::string& text) {
    const std::string path = workspace() / name;
    std::ofstream(path) << text;
    return path;
  };
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"train", workspace() / "missing.mirra"}, "cannot read model file"},
      {{"train", not_a_model}, "not a mirra model file"},
      {{"train", mlp_file(), "--config", bad_config}, "unknown key 'training.epoch'"},
      {{"train", mlp_file(), "--strategy", "parameter_servers"}, "'strategy' is 'parameter_servers'"},
      {{"train", mlp_file(), "--devices", "gpu:x"}, "devices[0]"},
      {{"train", mlp_file(), "--steps", "1", "--data", workspace() / "no_data"}, "no_data"},
      {{"train", mlp_file(), "--resume"}, "--resume needs a checkpoint directory"},
      {{"train", mlp_file(), "--batch-size", "0"}, "--batch-size"},
      {{"eval", not_a_model}, "not a mirra model file"},
      {{"inspect", mlp_file(), "--strategy", "mirrored", "--devices", "cpu:0,cpu:0"}, "repeats cpu:0"},
      // Both bounds of every integer, from a flag or a file; a key given twice.
      {{"config", "--print", "--seed", "-1"}, "--seed: Value -1 not in range"},
      {{"config", "--print", "--seed", "99999999999999999999"}, "--seed"},
      {{"train", mlp_file(), "--config", config_file("batch0.json", R"({"training": {"batch_size": 0}})")},
       "'training.batch_size' must be in [1, 1048576]"},
      {{"train", mlp_file(), "--config", config_file("accumulate0.json", R"({"training": {"accumulation_steps": 0}})")},
       "'training.accumulation_steps' must be in [1, 1048576]"},
      {{"train", mlp_file(), "--accumulation-steps", "0"}, "--accumulation-steps"},
      {{"train", mlp_file(), "--mixed-precision", "fp8"}, "--mixed-precision"},
      {{"train", mlp_file(), "--config", config_file("fp8.json", R"({"training": {"mixed_precision": "fp8"}})")},
       "'training.mixed_precision' must be \"off\", \"bf16\" or \"fp16\", not \"fp8\""},
      {{"train", mlp_file(), "--mixed-precision", "fp16", "--check-numerics"},
       "fp16 mixed precision skips the steps whose gradients overflow; it does not combine with check_numerics"},
      {{"train", mlp_file(), "--strategy", "central_storage", "--shard-optimizer-state"},
       "shard_optimizer_state applies to mirrored and multi_worker_mirrored, whose replicas each keep optimizer slots, "
       "not to central_storage"},
      {{"train", mlp_file(), "--config", config_file("shard_one.json", R"({"strategy": "one_device", "shard_optimizer_state": true})")},
       "'shard_optimizer_state' applies to mirrored and multi_worker_mirrored"},
      {{"train", mlp_file(), "--config", config_file("shard1.json", R"({"shard_optimizer_state": 1})")},
       "'shard_optimizer_state' must be true or false"},
      {{"train", mlp_file(), "--shard-optimizer-state", "--mixed-precision", "fp16"},
       "shard_optimizer_state does not combine with fp16 mixed precision yet"},
      {{"train", mlp_file(), "--shard-optimizer-state", "--check-numerics"},
       "shard_optimizer_state does not combine with check_numerics yet"},
      {{"train", mlp_file(), "--config", config_file("keep0.json", R"({"checkpoint": {"keep": 0}})")},
       "'checkpoint.keep' must be in [1, 1000]"},
      {{"config", "--print", "--config", config_file("seed_big.json", R"({"training": {"seed": 18446744073709551615}})")},
       "'training.seed' must be in [0, 4611686018427387904]"},
      {{"config", "--print", "--config", config_file("twice.json", R"({"training": {"epochs": 1, "epochs": 5}})")},
       "'training.epochs' appears twice"},
      {{"config", "--print", "--config", config_file("memory.json", R"({"training": {"memory_limit": "12Q"}})")},
       "'training.memory_limit' is '12Q'"},
      {{"config", "--print", "--config", config_file("decay.json", R"({"training": {"weight_decay": -0.1}})")},
       "'training.weight_decay' must be a number in [0, 1e6)"},
      {{"config", "--print", "--config", config_file("exclude.json", R"({"training": {"exclude_from_weight_decay": "gamma"}})")},
       "'training.exclude_from_weight_decay' must be a list of non-empty strings"},
      {{"config", "--print", "--config", config_file("augment.json", R"({"training": {"augmentation": {"crop": 4}}})")},
       "training.augmentation.crop"},
      {{"config", "--print", "--config", config_file("padding.json", R"({"training": {"augmentation": {"crop_padding": -4}}})")},
       "'training.augmentation.crop_padding' must be in [0, 1048576]"},
      {{"config", "--print", "--exclude-from-weight-decay", "gamma,,beta"}, "holds an empty name"},
  };
  int index = 0;
  for (const Case& c : cases) {
    CAPTURE(c.args[1]);
    CAPTURE(c.message);
    const Run r = run(c.args, "bad_" + std::to_string(index++));
    CHECK(r.code == 2);
    CHECK(r.err.find(c.message) != std::string::npos);
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') <= 2);
  }
}

}  // namespace mirra::runner

namespace mirra::runner {

// Whatever `config --print` writes, `--config` reads back to the same config.
TEST_CASE("Runner.config_print_round_trips_through_config") {
  const Run printed = run({"config", "--print", "--strategy", "central_storage", "--seed", "4611686018427387904", "--lr", "0.3",
                           "--memory-limit", "3G", "--check-numerics", "--soft-placement", "--allow-tf32", "--schedule", "cosine", "--decay-steps", "7",
                           "--checkpoint-dir", "ckpts", "--keep-checkpoints", "1000", "--steps", "9", "--weight-decay", "0.005",
                           "--exclude-from-weight-decay", "gamma,beta", "--crop-padding", "2", "--horizontal-flip"},
                          "printed");
  REQUIRE(printed.code == 0);
  const std::string file = workspace() / "printed.json";
  std::ofstream(file) << printed.out;
  const Run again = run({"config", "--print", "--config", file}, "printed_again");
  REQUIRE(again.code == 0);
  CHECK(again.out == printed.out);
  const auto config = nlohmann::json::parse(printed.out);
  CHECK(config["training"]["memory_limit"] == int64_t{3} << 30);
  CHECK(config["training"]["check_numerics"] == true);
  CHECK(config["training"]["soft_placement"] == true);
  CHECK(config["training"]["allow_tf32"] == true);
  CHECK(config["training"]["weight_decay"] == 0.005);
  CHECK(config["training"]["exclude_from_weight_decay"] == nlohmann::json({"gamma", "beta"}));
  CHECK(config["training"]["augmentation"] == nlohmann::json({{"crop_padding", 2}, {"horizontal_flip", true}}));
}

}  // namespace mirra::runner
