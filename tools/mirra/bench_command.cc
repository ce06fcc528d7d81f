// The bench subcommands: flags with ranges, results as one JSON line on stdout.
#include "tools/mirra/bench_command.h"

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <optional>

#include "bench/worker_all_reduce.h"
#include "graph/attr.h"
#include "ops/registry.h"
#include "tools/mirra/commands.h"
#include "tools/mirra/program_data.h"
#include "tools/mirra/run_config.h"
#include "tools/mirra/step_profile.h"

namespace mirra::runner {

void add_bench_commands(CLI::App& app, BenchCommands& commands) {
  auto* bench = app.add_subcommand("bench", "Benchmarks, each measured next to its peer; prints JSON");
  bench->require_subcommand(1);
  commands.executor = bench->add_subcommand("executor", "Executor per-node overhead vs a raw oneTBB flow graph");
  commands.executor->add_option("--nodes", commands.executor_options.nodes, "Nodes per shape")->check(CLI::Range(1, 10'000'000));
  commands.executor->add_option("--threads", commands.executor_options.threads, "oneTBB threads")->check(CLI::Range(1, 1024));
  commands.executor->add_option("--device", commands.executor_device,
                                 "cpu (logical CPU devices), gpu:0 (against raw CUDA launches) or cpu_async:0 (the GPU's "
                                 "model, against raw work on a worker stream)")
      ->check(CLI::IsMember({"cpu", "gpu:0", "cpu_async:0"}));
  commands.executor->add_option("--repetitions", commands.executor_options.repetitions, "Runs per shape (the best counts)")
      ->check(CLI::Range(1, 1000));
  commands.training = bench->add_subcommand("training", "One-device training throughput on Fashion-MNIST (JSON)");
  commands.training->add_option("--model", commands.training_options.model, "mlp, cnn, resnet20, resnet18 or resnet50")
      ->check(CLI::IsMember({"mlp", "cnn", "resnet20", "resnet18", "resnet50"}));
  commands.training->add_flag("--synthetic", commands.training_options.synthetic,
                              "Random images of the model's shape instead of Fashion-MNIST (resnet18, resnet50)");
  commands.training->add_option("--threads", commands.training_options.threads, "oneTBB threads")->check(CLI::Range(1, 1024));
  commands.training->add_option("--strategy", commands.training_options.strategy, "one_device, mirrored or central_storage")
      ->check(CLI::IsMember({"one_device", "mirrored", "central_storage"}));
  commands.training->add_option("--batch-size", commands.training_options.batch_size, "Global batch size")
      ->check(CLI::Range(int64_t{1}, int64_t{65536}));
  commands.training->add_option("--warmup-steps", commands.training_options.warmup_steps, "Steps before the timed window")
      ->check(CLI::Range(int64_t{1}, int64_t{100000}));
  commands.training->add_option("--steps", commands.training_options.steps, "Timed steps")->check(CLI::Range(int64_t{1}, int64_t{1000000}));
  commands.training->add_option("--data", commands.training_options.data_dir, "Directory with the Fashion-MNIST IDX files");
  commands.training->add_option("--devices", commands.training_options.devices, "Devices (default: the strategy's)")
      ->delimiter(',');
  commands.training->add_option("--logical-gpus-per-gpu", commands.training_options.logical_gpus_per_gpu,
                                "Each GPU (and cpu_async device) split into this many logical devices")
      ->check(CLI::Range(1, 64));
  commands.training->add_flag("--allow-tf32", commands.training_options.allow_tf32, "Let GPUs multiply f32 in TF32");
  commands.training->add_flag("--cuda-graph", commands.training_options.cuda_graph,
                              "Record the step once and replay it (a CUDA graph on GPUs)");
  commands.training->add_option("--mixed-precision", commands.training_options.mixed_precision,
                                "bf16: products and convolutions on bf16 operands (default off)")
      ->check(CLI::IsMember({"off", "bf16"}));
  commands.training->add_option("--optimizer", commands.training_options.optimizer,
                                "momentum (the benchmark's, default) or adam")
      ->check(CLI::IsMember({"momentum", "adam"}));
  commands.training->add_flag("--profile", commands.training_profile,
                              "Where the timed steps' time went (as mirra train --profile): in the JSON as profile, "
                              "and as tables on stderr; the steps record their timelines");
  commands.training->add_flag("--shard-optimizer-state", commands.training_options.shard_optimizer_state,
                              "mirrored: each replica keeps only its share of the optimizer slots");
  commands.accuracy = bench->add_subcommand("accuracy", "Epochs and time until a target test accuracy (JSON)");
  commands.accuracy->add_option("--model", commands.accuracy_options.model, "mlp, cnn or resnet20")->check(CLI::IsMember({"mlp", "cnn", "resnet20"}));
  commands.accuracy->add_option("--target", commands.accuracy_options.target, "Test accuracy to reach")->check(CLI::Range(0.0, 1.0));
  commands.accuracy->add_option("--max-epochs", commands.accuracy_options.max_epochs, "Give up after this many epochs")
      ->check(CLI::Range(int64_t{1}, int64_t{1000}));
  commands.accuracy->add_option("--threads", commands.accuracy_options.threads, "oneTBB threads (0: all cores)")->check(CLI::Range(0, 1024));
  commands.accuracy->add_option("--data", commands.accuracy_options.data_dir, "Directory with the Fashion-MNIST IDX files");
  commands.data = bench->add_subcommand("data", "Input pipeline throughput on a config's training data (JSON)");
  commands.data->add_option("--config", commands.data_config, "Config file whose data.train (or training.data) is read")->required();
  commands.data->add_option("--batch-size", commands.data_options.batch_size, "Batch size")->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  commands.data->add_option("--batches", commands.data_options.batches, "Timed batches")->check(CLI::Range(int64_t{1}, int64_t{1} << 30));
  commands.data->add_option("--data-threads", commands.data_options.threads, "Threads that assemble each batch")->check(CLI::Range(1, 1024));
  commands.all_reduce = bench->add_subcommand("allreduce", "In-process all-reduce vs the streaming-memory bound (JSON)");
  commands.all_reduce->add_option("--replicas", commands.all_reduce_options.replicas, "Replica counts")->check(CLI::Range(1, 64));
  commands.all_reduce->add_option("--sizes-mib", commands.all_reduce_options.sizes_mib, "Buffer sizes per replica, MiB")
      ->check(CLI::Range(int64_t{1}, int64_t{4096}));
  commands.all_reduce->add_option("--threads", commands.all_reduce_options.threads, "oneTBB threads")->check(CLI::Range(1, 1024));
  commands.all_reduce->add_option("--repetitions", commands.all_reduce_options.repetitions, "Runs per size (the best counts)")
      ->check(CLI::Range(1, 1000));
  commands.all_reduce->add_flag("--across-workers", commands.all_reduce_options.across_workers,
                                "Under mpirun: the all-reduce across worker processes (MPI), as multi_worker_mirrored runs it");
  commands.all_reduce->add_option("--device", commands.all_reduce_device,
                                  "cpu (replicas on logical CPU devices, summed on the host; default), or gpu or cpu_async "
                                  "(replicas on logical devices of device 0, summed there, against its copy rate)")
      ->check(CLI::IsMember({"cpu", "cpu_async", "gpu"}));
  commands.files = bench->add_subcommand("files", "Model file and checkpoint save/load vs raw write+fsync/read (JSON)");
  commands.files->add_option("--dir", commands.files_options.directory, "Directory for the files");
  commands.files->add_option("--repetitions", commands.files_options.repetitions, "Runs (the best counts)")
      ->check(CLI::Range(1, 1000));
}

int run_bench(const BenchCommands& commands) {
  if (*commands.executor && commands.executor_device != "cpu") {
    const bench::ExecutorOverheadOptions& o = commands.executor_options;
    auto device = graph::DeviceId::parse(commands.executor_device);
    if (!device.ok()) return report_error(device.status());
    auto result = bench::run_stream_executor_overhead(
        {.device = *device, .nodes = std::min(o.nodes, 100000), .threads = o.threads, .repetitions = o.repetitions});
    if (!result.ok()) return report_error(result.status());
    std::cout << result->dump() << "\n";
  } else if (*commands.executor) {
    std::cout << bench::run_executor_overhead(commands.executor_options).dump() << "\n";
  }
  if (*commands.files) std::cout << bench::run_file_io(commands.files_options).dump() << "\n";
  if (*commands.all_reduce && commands.all_reduce_options.across_workers) {
    auto result = bench::run_worker_all_reduce(commands.all_reduce_options);
    if (!result.ok()) return report_error(result.status());
    if (!result->is_null()) std::cout << result->dump() << "\n";
  } else if (*commands.all_reduce && commands.all_reduce_device != "cpu") {
    const bench::AllReduceBandwidthOptions& o = commands.all_reduce_options;
    auto result = bench::run_on_device_all_reduce(
        {.kind = commands.all_reduce_device == "gpu" ? graph::DeviceKind::gpu : graph::DeviceKind::cpu_async,
         .replicas = o.replicas,
         .sizes_mib = o.sizes_mib,
         .threads = o.threads,
         .repetitions = o.repetitions});
    if (!result.ok()) return report_error(result.status());
    std::cout << result->dump() << "\n";
  } else if (*commands.all_reduce) {
    std::cout << bench::run_all_reduce_bandwidth(commands.all_reduce_options).dump() << "\n";
  }
  if (*commands.data) {
    auto config = load_run_config(commands.data_config);
    if (!config.ok()) return report_error(config.status());
    auto spec = training_data_spec(*config);
    if (!spec.ok()) return report_error(spec.status());
    auto source = open_data_source(*spec, DataUse::train);
    if (!source.ok()) return report_error(source.status());
    auto result = bench::run_input_pipeline(*source, commands.data_options);
    if (!result.ok()) return report_error(result.status());
    std::cout << result->dump() << "\n";
  }
  if (*commands.training || *commands.accuracy) {
    // --profile: the timed steps' profile (the last warm-up step comes first, and is left out as a
    // profile's first step is), in the JSON and as tables on stderr.
    std::optional<graph::Graph> graph;  // the session's, kept for the profile, which outlives it
    std::optional<StepProfile> profile;
    bench::TrainingThroughputOptions training = commands.training_options;
    if (commands.training_profile) {
      training.trace = true;
      training.on_step = [&](const runtime::Session& session, const runtime::training::StepMetrics& step) {
        if (step.step + 1 < training.warmup_steps) return;
        if (!profile) profile.emplace(graph.emplace(session.graph()), "the last warm-up step");
        profile->add_step(step, session.last_timeline());
      };
    }
    auto result = *commands.training ? bench::run_training_throughput(training)
                                     : bench::run_time_to_accuracy(commands.accuracy_options);
    if (!result.ok()) return report_error(result.status());
    if (profile) {
      (*result)["profile"] = profile->json();
      std::fputs(profile->table().c_str(), stderr);
    }
    std::cout << result->dump() << "\n";
  }
  return 0;
}

void print_ops() {
  const auto& registry = ops::registry();
  for (const std::string& name : registry.names()) {
    const graph::OpSchema& schema = *registry.find(name);
    std::string inputs;
    for (size_t i = 0; i < schema.inputs.size(); ++i) {
      const bool optional = i + schema.optional_inputs >= schema.inputs.size();
      inputs += (i > 0 ? ", " : "") + schema.inputs[i] + (schema.variadic && i + 1 == schema.inputs.size() ? "..." : "") +
                (optional ? "?" : "");
    }
    std::printf("%s(%s)\n    %s\n", name.c_str(), inputs.c_str(), schema.summary.c_str());
    for (const auto& attr : schema.attrs) {
      std::printf("    %s: %s%s\n", attr.name.c_str(), std::string(graph::attr_type_name(attr.type)).c_str(),
                  attr.default_value ? (" = " + graph::attr_to_string(*attr.default_value)).c_str()
                                     : (attr.optional ? " (optional)" : ""));
    }
  }
}

}  // namespace mirra::runner
