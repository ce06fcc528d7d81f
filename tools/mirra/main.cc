// mirra: the runner. `mirra ops` lists the built-in ops with their inputs and attributes;
// `mirra bench executor` measures the executor next to a raw oneTBB flow graph and prints JSON.
// Exit codes: 0 success, 2 bad flags, 1 internal failure.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <iostream>

#include "bench/executor_overhead.h"
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
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  try {
    if (*ops_command) print_ops();
    if (*executor) std::cout << mirra::bench::run_executor_overhead(executor_options).dump() << "\n";
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mirra: internal error: %s\n", e.what());
    return 1;
  }
  return 0;
}
