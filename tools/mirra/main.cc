// mirra: the runner. `mirra ops` lists the built-in ops with their inputs and attributes;
// `mirra bench executor` measures the executor next to a raw oneTBB flow graph and prints JSON;
// `mirra bench training` measures one-device training throughput (bench/training_vs_pytorch.py
// runs it next to PyTorch); `mirra bench accuracy` trains until a target test accuracy; `mirra bench
// allreduce` measures the in-process all-reduce against the memory bound.
// Exit codes: 0 success, 2 bad flags, 1 internal failure.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <iostream>

#include "bench/all_reduce_bandwidth.h"
#include "bench/executor_overhead.h"
#include "bench/time_to_accuracy.h"
#include "bench/training_throughput.h"
#include "graph/attr.h"
#include "ops/registry.h"

namespace {

void print_ops() {
  const auto& registry = mirra::ops::registry();
  for (const std::string& name : registry.names()) {
    const mirra::graph::OpSchema& schema = *registry.find(name);
    std::string inputs;
    for (size_t i = 0; i < schema.inputs.size(); ++i) {
      inputs += (i > 0 ? ", " : "") + schema.inputs[i] + (schema.variadic && i + 1 == schema.inputs.size() ? "..." : "");
    }
    std::printf("%s(%s)\n    %s\n", name.c_str(), inputs.c_str(), schema.summary.c_str());
    for (const auto& attr : schema.attrs) {
      std::printf("    %s: %s%s\n", attr.name.c_str(), std::string(mirra::graph::attr_type_name(attr.type)).c_str(),
                  attr.default_value ? (" = " + mirra::graph::attr_to_string(*attr.default_value)).c_str() : "");
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"mirra: data-parallel training with TensorFlow-style distribution strategies"};
  app.require_subcommand(1);
  auto* ops_command = app.add_subcommand("ops", "List the built-in ops, their inputs and attributes");
  auto* bench = app.add_subcommand("bench", "Benchmarks, each measured next to its peer; prints JSON");
  bench->require_subcommand(1);
  mirra::bench::ExecutorOverheadOptions executor_options;
  auto* executor = bench->add_subcommand("executor", "Executor per-node overhead vs a raw oneTBB flow graph");
  executor->add_option("--nodes", executor_options.nodes, "Nodes per shape")->check(CLI::Range(1, 10'000'000));
  executor->add_option("--threads", executor_options.threads, "oneTBB threads")->check(CLI::Range(1, 1024));
  executor->add_option("--repetitions", executor_options.repetitions, "Runs per shape (the best counts)")
      ->check(CLI::Range(1, 1000));
  mirra::bench::TrainingThroughputOptions training_options;
  auto* training = bench->add_subcommand("training", "One-device training throughput on Fashion-MNIST (JSON)");
  training->add_option("--model", training_options.model, "mlp or cnn")->check(CLI::IsMember({"mlp", "cnn"}));
  training->add_option("--threads", training_options.threads, "oneTBB threads")->check(CLI::Range(1, 1024));
  training->add_option("--strategy", training_options.strategy, "one_device, mirrored or central_storage")
      ->check(CLI::IsMember({"one_device", "mirrored", "central_storage"}));
  training->add_option("--batch-size", training_options.batch_size, "Global batch size")
      ->check(CLI::Range(int64_t{1}, int64_t{65536}));
  training->add_option("--warmup-steps", training_options.warmup_steps, "Steps before the timed window")
      ->check(CLI::Range(int64_t{1}, int64_t{100000}));
  training->add_option("--steps", training_options.steps, "Timed steps")->check(CLI::Range(int64_t{1}, int64_t{1000000}));
  training->add_option("--data", training_options.data_dir, "Directory with the Fashion-MNIST IDX files");
  mirra::bench::TimeToAccuracyOptions accuracy_options;
  auto* accuracy = bench->add_subcommand("accuracy", "Epochs and time until a target test accuracy (JSON)");
  accuracy->add_option("--model", accuracy_options.model, "mlp or cnn")->check(CLI::IsMember({"mlp", "cnn"}));
  accuracy->add_option("--target", accuracy_options.target, "Test accuracy to reach")->check(CLI::Range(0.0, 1.0));
  accuracy->add_option("--max-epochs", accuracy_options.max_epochs, "Give up after this many epochs")
      ->check(CLI::Range(int64_t{1}, int64_t{1000}));
  accuracy->add_option("--threads", accuracy_options.threads, "oneTBB threads (0: all cores)")->check(CLI::Range(0, 1024));
  accuracy->add_option("--data", accuracy_options.data_dir, "Directory with the Fashion-MNIST IDX files");
  mirra::bench::AllReduceBandwidthOptions all_reduce_options;
  auto* all_reduce = bench->add_subcommand("allreduce", "In-process all-reduce vs the streaming-memory bound (JSON)");
  all_reduce->add_option("--replicas", all_reduce_options.replicas, "Replica counts")->check(CLI::Range(1, 64));
  all_reduce->add_option("--sizes-mib", all_reduce_options.sizes_mib, "Buffer sizes per replica, MiB")
      ->check(CLI::Range(int64_t{1}, int64_t{4096}));
  all_reduce->add_option("--threads", all_reduce_options.threads, "oneTBB threads")->check(CLI::Range(1, 1024));
  all_reduce->add_option("--repetitions", all_reduce_options.repetitions, "Runs per size (the best counts)")
      ->check(CLI::Range(1, 1000));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  try {
    if (*ops_command) print_ops();
    if (*executor) std::cout << mirra::bench::run_executor_overhead(executor_options).dump() << "\n";
    if (*all_reduce) std::cout << mirra::bench::run_all_reduce_bandwidth(all_reduce_options).dump() << "\n";
    if (*training || *accuracy) {
      auto result = *training ? mirra::bench::run_training_throughput(training_options)
                              : mirra::bench::run_time_to_accuracy(accuracy_options);
      if (!result.ok()) {
        std::fprintf(stderr, "mirra: %s\n", result.status().to_string().c_str());
        return 1;
      }
      std::cout << result->dump() << "\n";
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mirra: internal error: %s\n", e.what());
    return 1;
  }
  return 0;
}
