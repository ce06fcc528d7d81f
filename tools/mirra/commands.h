// The runner's subcommands behind the CLI: each takes its parsed options and returns the process
// exit code (0 success, 2 bad input: a file, config, flag or data set; 1 a failure of the machine or
// of mirra: a device or peer unavailable, a deadline, an internal error), having printed a one-line
// error that names the problem.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "graph/status.h"
#include "tools/mirra/run_config.h"

namespace mirra::runner {

struct TrainCommand {
  std::string model;
  RunConfig config;
  bool resume = false;      // continue from the newest good checkpoint in config.checkpoint.dir
  std::string save;         // write the trained model here
  bool eval = false;        // evaluate on the test split after each epoch
  bool json = false;        // last stdout line: a JSON summary
  std::string metrics;      // JSON lines, one per step
  std::string trace;        // Chrome trace
  bool profile = false;     // where a step's time goes, at the end (and in the JSON summary)
};

struct EvalCommand {
  std::string model;
  std::string data;  // the evaluation data's shorthand (data_spec.h); a Fashion-MNIST directory gives its test split
  int64_t batch_size = 1000;
  int threads = 0;
  int data_threads = 1;
  int64_t memory_limit = 0;  // bytes; 0: nine tenths of physical memory
  bool json = false;
};

struct PredictCommand {
  std::string model;
  std::string data;                  // the data's shorthand (data_spec.h); a Fashion-MNIST directory gives its test split
  std::vector<std::string> outputs;  // values of the graph: "node" or "node:k"
  std::string out;                   // .npy (one output) or .npz
  std::vector<std::string> devices;  // empty: one device (the first GPU, else cpu:0); several: each batch split between them
  int64_t batch_size = 1000;
  int threads = 0;
  int data_threads = 1;
  int64_t memory_limit = 0;
  bool json = false;
};

struct InspectCommand {
  std::string model;
  std::string strategy;  // empty: the model as stored
  std::vector<std::string> devices;
  int logical_gpus_per_gpu = 1;  // with a strategy
  bool dot = false;
  int collapse_below = 2;  // with dot: the name-scope depth drawn as one box (0: every node)
  std::string svg;         // with dot: render to this SVG file instead of printing
  std::string mixed_precision = "off";  // with a strategy
  bool shard_optimizer_state = false;  // with a strategy
  int64_t batch_size = 128;  // for the memory the summary plans
  // With --strategy parameter_server: the cluster's shape, the least bytes of a variable's part, and
  // async or sync ("" for the default).
  int servers = 1;
  int workers = 1;
  int64_t min_shard_bytes = 0;
  std::string update_mode;
};

struct SimulateCommand {
  std::string model;
  std::string strategy = "mirrored";  // mirrored, multi_worker_mirrored (alike: a replica per device) or one_device
  std::string cluster;                // the cluster file (examples/clusters/)
  int64_t batch_size = 32;            // per device
  std::string bucket_mb = "25";       // a gradient bucket's cap in MiB, or "auto": the best of several per point
  std::vector<std::string> algorithms;  // empty: ring, tree and hierarchical
  std::string mixed_precision = "off";
  std::string costs;                  // a trace of a real run: its kernels' times instead of the roofline
  std::vector<std::string> devices = {"cpu_async:0", "cpu_async:1"};  // the rewrite's; replica 0 is simulated
  bool json = false;
  std::string plot;                   // an SVG chart of the sweep
};

struct DevicesCommand {
  bool json = false;
};

int run_train(const TrainCommand& command);
// run_train's for the parameter_server strategy: this process's task of the cluster MIRRA_CLUSTER names.
int run_parameter_server_task(const TrainCommand& command);
int run_eval(const EvalCommand& command);
int run_predict(const PredictCommand& command);
int run_inspect(const InspectCommand& command);
int run_simulate(const SimulateCommand& command);
int run_devices(const DevicesCommand& command);

// resource_exhausted when `graph` at `batch_size` needs more than `limit_bytes` (runtime::estimate_memory
// over what `roots` need, every node without roots, with the shapes inferred again through `schemas`).
graph::Status check_memory(const graph::Graph& graph, const graph::OpRegistry& schemas, int64_t batch_size,
                           int64_t limit_bytes, std::span<const graph::NodeId> roots = {});

// Prints the error to stderr and returns its exit code: "mirra: error: <message>" and 2 when the
// status blames the input (graph::blames_input), "mirra: error (<code>): <message>" and 1 otherwise.
int report_error(const graph::Status& status);

}  // namespace mirra::runner
