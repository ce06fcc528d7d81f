// mirra: the runner. Trains, evaluates, predicts with and inspects model files with a strategy chosen
// by flag or config, predicts their scaling on a cluster, prints the resolved config, and runs the
// benchmarks. docs/cli.md describes every command.
//   mirra train MODEL [--strategy mirrored] [--epochs N | --steps N] [--checkpoint-dir DIR --resume] ...
//   mirra predict MODEL --outputs NAME[,NAME] --out FILE.npy|.npz [--data SPEC] [--devices LIST]
//   mirra eval MODEL          mirra inspect MODEL [--strategy S --devices L [--mixed-precision M]
//                             [--shard-optimizer-state]] [--dot] [--batch-size N]
//   mirra config --print      mirra bench executor|training|accuracy|allreduce      mirra ops
//   mirra devices [--json]      mirra --version
//   mirra simulate MODEL --cluster CLUSTER.json [--strategy S] [--batch-size N] [--bucket-mb X|auto] [--plot F.svg]
// Exit codes: 0 success, 2 bad input (file, config, flags, data), 1 a device, peer, deadline or
// internal failure (docs/cli.md).
#include <CLI/CLI.hpp>

#include <csignal>
#include <cstdio>
#include <new>
#include <string>

#include "ops/build_info.h"
#include "runtime/data/fashion_mnist.h"
#include "tools/mirra/bench_command.h"
#include "tools/mirra/commands.h"
#include "tools/mirra/interrupts.h"
#include "tools/mirra/run_flags.h"

namespace runner = mirra::runner;

int main(int argc, char** argv) {
  runner::start_interrupt_watcher();
  // A reader that goes away (`mirra train --json | head -1`) must not end training: writes to a closed
  // pipe then fail with EPIPE, the output is lost, and the run finishes its checkpoints and saves.
  std::signal(SIGPIPE, SIG_IGN);
  CLI::App app{"mirra: data-parallel training with TensorFlow-style distribution strategies"};
  app.require_subcommand(1);
  app.set_version_flag("--version", [] {
    std::string info = mirra::ops::build_info();
    info.pop_back();  // the last line's newline: CLI11 ends the text with one
    return info;
  }, "Print the version and what this build has (CUDA, MPI, library versions), then exit");

  runner::TrainCommand train;
  runner::RunFlags train_flags;
  auto* train_app = app.add_subcommand("train", "Train a model file on Fashion-MNIST with a distribution strategy");
  train_app->add_option("MODEL", train.model, "Model file (.mirra), e.g. from mirra-examples write")->required();
  runner::add_run_flags(*train_app, train_flags);
  train_app->add_flag("--resume", train.resume, "Continue from the newest good checkpoint in --checkpoint-dir");
  train_app->add_option("--save", train.save, "Write the trained model (weights and optimizer state) here");
  train_app->add_flag("--eval", train.eval, "Evaluate on the test split after each epoch");
  train_app->add_flag("--json", train.json, "Print a JSON summary as the last line of stdout");
  train_app->add_option("--metrics", train.metrics, "Write one JSON line per step to this file");
  train_app->add_option("--trace", train.trace, "Write a Chrome trace (Perfetto, chrome://tracing) to this file");
  train_app->add_flag("--profile", train.profile,
                      "At the end, where a step's time went: by op, by device (computing, collectives, copies, waiting, "
                      "exposed communication), the executor's time per node and the slowest nodes");

  runner::EvalCommand eval;
  eval.data = mirra::runtime::data::kFashionMnistDir;
  auto* eval_app = app.add_subcommand("eval", "Test accuracy and loss of a model file");
  eval_app->add_option("MODEL", eval.model, "Model file (.mirra)")->required();
  eval_app->add_option("--data", eval.data,
                       "Evaluation data: a directory of Fashion-MNIST's IDX files (its test split), or .npy/.npz files "
                       "(comma-separated) whose arrays are named as the model's placeholders");
  eval_app->add_option("--data-threads", eval.data_threads, "Threads that assemble each batch (default 1)")->check(CLI::Range(1, 1024));
  eval_app->add_option("--batch-size", eval.batch_size, "Examples per batch")->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  eval_app->add_option("--threads", eval.threads, "oneTBB threads (0: all cores)")->check(CLI::Range(0, 1024));
  eval_app->add_flag("--json", eval.json, "Print the result as JSON");
  std::string eval_memory_limit;
  eval_app->add_option("--memory-limit", eval_memory_limit, "Most memory evaluation may plan to use, e.g. 16G");

  runner::PredictCommand predict;
  predict.data = mirra::runtime::data::kFashionMnistDir;
  std::string predict_outputs, predict_devices, predict_memory_limit;
  auto* predict_app = app.add_subcommand("predict", "Write a model's outputs over a data set to an .npy or .npz file");
  predict_app->add_option("MODEL", predict.model, "Model file (.mirra)")->required();
  predict_app->add_option("--data", predict.data,
                          "The examples: a directory of Fashion-MNIST's IDX files (its test split), or .npy/.npz or .csv "
                          "files (comma-separated) whose arrays or columns are named as the model's placeholders");
  predict_app->add_option("--outputs", predict_outputs, "Comma-separated values of the graph to write, e.g. logits/BiasAdd")->required();
  predict_app->add_option("--out", predict.out, "The .npy file (one output) or .npz file to write")->required();
  predict_app->add_option("--devices", predict_devices, "Comma-separated devices that share each batch (default: one)");
  predict_app->add_option("--batch-size", predict.batch_size, "Examples per batch")->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  predict_app->add_option("--threads", predict.threads, "oneTBB threads (0: all cores)")->check(CLI::Range(0, 1024));
  predict_app->add_option("--data-threads", predict.data_threads, "Threads that assemble each batch (default 1)")->check(CLI::Range(1, 1024));
  predict_app->add_option("--memory-limit", predict_memory_limit, "Most memory prediction may plan to use, e.g. 16G");
  predict_app->add_flag("--json", predict.json, "Print a JSON summary");

  runner::InspectCommand inspect;
  std::string inspect_devices;
  auto* inspect_app = app.add_subcommand("inspect", "Ops, parameters and shapes of a model file, or a strategy's rewrite of it");
  inspect_app->add_option("MODEL", inspect.model, "Model file (.mirra)")->required();
  inspect_app->add_option("--strategy", inspect.strategy, "Show the training graph this strategy makes");
  inspect_app->add_option("--devices", inspect_devices, "Comma-separated devices for --strategy");
  inspect_app->add_option("--logical-gpus-per-gpu", inspect.logical_gpus_per_gpu,
                          "With --strategy: each GPU (and cpu_async device) split into this many logical devices")
      ->check(CLI::Range(1, mirra::strategies::kMaxLogicalGpusPerGpu));
  inspect_app->add_flag("--dot", inspect.dot,
                        "Print the graph as DOT for Graphviz: devices and name scopes as clusters, the collectives, "
                        "copies and batch split drawn apart");
  inspect_app->add_option("--collapse-below", inspect.collapse_below,
                          "With --dot: draw each name scope this many levels deep as one box (0: every node; default 2)")
      ->check(CLI::Range(0, 64));
  inspect_app->add_option("--svg", inspect.svg, "With --dot: render the picture to this SVG file with Graphviz's dot");
  inspect_app->add_option("--mixed-precision", inspect.mixed_precision,
                          "With --strategy: the training graph with bf16 or fp16 products (default off)")
      ->check(CLI::IsMember({"off", "bf16", "fp16"}));
  inspect_app->add_flag("--shard-optimizer-state", inspect.shard_optimizer_state,
                        "With --strategy mirrored: the training graph with sharded optimizer state");
  inspect_app->add_option("--batch-size", inspect.batch_size, "Batch size of the memory the summary plans (default 128)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  inspect_app->add_option("--servers", inspect.servers, "With --strategy parameter_server: parameter servers (default 1)")
      ->check(CLI::Range(1, 1024));
  inspect_app->add_option("--workers", inspect.workers, "With --strategy parameter_server: workers (default 1)")
      ->check(CLI::Range(1, 1024));
  inspect_app->add_option("--min-shard-bytes", inspect.min_shard_bytes,
                          "With --strategy parameter_server: cut variables into parts of at least this many bytes across the "
                          "servers (default 0: whole)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 62));
  inspect_app->add_option("--update-mode", inspect.update_mode,
                          "With --strategy parameter_server: async (each worker's copy of the program; the default) or sync")
      ->check(CLI::IsMember({"async", "sync"}));

  runner::RunFlags config_flags;
  bool print_config = false;
  auto* config_app = app.add_subcommand("config", "The resolved training config: defaults < --config file < flags");
  config_app->add_flag("--print", print_config, "Print it as JSON")->required();
  runner::add_run_flags(*config_app, config_flags);

  runner::SimulateCommand simulate;
  std::string simulate_algorithms;
  std::string simulate_devices;
  auto* simulate_app = app.add_subcommand(
      "simulate", "Predict a training step's time and its scaling from 1 to 4,096 devices of a cluster");
  simulate_app->add_option("MODEL", simulate.model, "Model file (.mirra)")->required();
  simulate_app->add_option("--strategy", simulate.strategy, "mirrored (default), multi_worker_mirrored or one_device");
  simulate_app->add_option("--cluster", simulate.cluster, "Cluster file (JSON; presets in examples/clusters/)")->required();
  simulate_app->add_option("--batch-size", simulate.batch_size, "Examples per device and step (default 32)")
      ->check(CLI::PositiveNumber);
  simulate_app->add_option("--bucket-mb", simulate.bucket_mb,
                           "Gradient bucket cap in MiB (default 25), or auto: the fastest of 1 to 100 MiB at each point");
  simulate_app->add_option("--algorithm", simulate_algorithms,
                           "Comma-separated all-reduce algorithms: ring, tree, hierarchical (default: all three)");
  simulate_app->add_option("--mixed-precision", simulate.mixed_precision, "off (default), bf16 or fp16");
  simulate_app->add_option("--costs", simulate.costs,
                           "A trace of a real run (mirra train --trace): its kernels' measured times instead of the roofline");
  simulate_app->add_option("--devices", simulate_devices,
                           "Comma-separated devices the strategy's rewrite replicates over (default cpu_async:0,cpu_async:1, "
                           "the GPU's model); with --costs, the traced run's");
  simulate_app->add_flag("--json", simulate.json, "Print one JSON object instead of the table");
  simulate_app->add_option("--plot", simulate.plot, "Write an SVG chart of efficiency and exposed communication");

  runner::BenchCommands bench;
  runner::add_bench_commands(app, bench);
  auto* ops_app = app.add_subcommand("ops", "List the built-in ops, their inputs and attributes");
  runner::DevicesCommand devices;
  auto* devices_app = app.add_subcommand("devices", "The CPU and the GPUs of this machine, with the CUDA software versions");
  devices_app->add_flag("--json", devices.json, "Print one JSON object");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  try {
    if (*train_app) {
      auto config = runner::resolve_run_config(train_flags);
      if (!config.ok()) return runner::report_error(config.status());
      train.config = std::move(*config);
      return runner::run_train(train);
    }
    if (*eval_app) {
      if (!eval_memory_limit.empty()) {
        auto limit = runner::parse_byte_size(eval_memory_limit, "--memory-limit");
        if (!limit.ok()) return runner::report_error(limit.status());
        eval.memory_limit = *limit;
      }
      return runner::run_eval(eval);
    }
    if (*predict_app) {
      if (!predict_memory_limit.empty()) {
        auto limit = runner::parse_byte_size(predict_memory_limit, "--memory-limit");
        if (!limit.ok()) return runner::report_error(limit.status());
        predict.memory_limit = *limit;
      }
      predict.outputs = runner::split_comma_list(predict_outputs);
      predict.devices = runner::split_comma_list(predict_devices);
      return runner::run_predict(predict);
    }
    if (*inspect_app) {
      inspect.devices = runner::split_comma_list(inspect_devices);
      return runner::run_inspect(inspect);
    }
    if (*simulate_app) {
      simulate.algorithms = runner::split_comma_list(simulate_algorithms);
      if (!simulate_devices.empty()) simulate.devices = runner::split_comma_list(simulate_devices);
      return runner::run_simulate(simulate);
    }
    if (*config_app) {
      auto config = runner::resolve_run_config(config_flags);
      if (!config.ok()) return runner::report_error(config.status());
      std::printf("%s\n", runner::run_config_json(*config).c_str());
      return 0;
    }
    if (*devices_app) return runner::run_devices(devices);
    if (*ops_app) {
      runner::print_ops();
      return 0;
    }
    return runner::run_bench(bench);
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "mirra: error: out of memory\n");
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mirra: internal error: %s\n", e.what());
    return 1;
  }
}
