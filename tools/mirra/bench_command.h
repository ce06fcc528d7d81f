// `mirra bench ...`: the benchmarks of bench/, each measured next to its peer, printing JSON; and
// `mirra ops`, the built-in ops with their inputs and attributes.
#pragma once

#include <CLI/CLI.hpp>

#include "bench/all_reduce_bandwidth.h"
#include "bench/executor_overhead.h"
#include "bench/stream_executor_overhead.h"
#include "bench/file_io.h"
#include "bench/on_device_all_reduce.h"
#include "bench/input_pipeline.h"
#include "bench/time_to_accuracy.h"
#include "bench/training_throughput.h"

namespace mirra::runner {

struct BenchCommands {
  CLI::App* executor = nullptr;
  CLI::App* training = nullptr;
  CLI::App* accuracy = nullptr;
  CLI::App* all_reduce = nullptr;
  CLI::App* files = nullptr;
  CLI::App* data = nullptr;
  bench::InputPipelineOptions data_options;
  std::string data_config;  // the config file whose training data is read
  bench::ExecutorOverheadOptions executor_options;
  std::string executor_device = "cpu";  // or gpu:0, cpu_async:0: a chain on a device with streams
  bench::TrainingThroughputOptions training_options;
  bool training_profile = false;  // mirra bench training --profile
  bench::TimeToAccuracyOptions accuracy_options;
  bench::AllReduceBandwidthOptions all_reduce_options;
  std::string all_reduce_device = "cpu";  // or cpu_async, gpu: logical devices of one device, summed on it
  bench::FileIoOptions files_options;
};

// Adds `bench` and its subcommands to `app`; `commands` must outlive parsing.
void add_bench_commands(CLI::App& app, BenchCommands& commands);
// Runs the parsed bench subcommand; returns the exit code.
int run_bench(const BenchCommands& commands);
void print_ops();

}  // namespace mirra::runner
