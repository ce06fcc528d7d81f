// mirra simulate: the step a strategy makes of a model, one replica's part costed on a cluster's device
// (simulate/step_graph.h), simulated at each device count with each all-reduce algorithm
// (simulate/scaling.h); a table or JSON, and a chart. The rewrite is made over two cpu_async devices
// (the GPU's model: a replica per device, each rank of a collective on its own device), or the
// devices --devices names, with the batch per device on each; the simulation then takes the
// replicas' nodes (with CPU devices, the host's too, on the first), its kernels timed
// by their roofline or, with --costs, as a real run's trace measured them. docs/simulate.md.
#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>
#include <map>
#include <optional>

#include "ops/registry.h"
#include "simulate/measured_costs.h"
#include "simulate/scaling.h"
#include "simulate/scaling_plot.h"
#include "simulate/step_graph.h"
#include "strategies/config_json.h"
#include "strategies/strategy.h"
#include "tools/mirra/commands.h"
#include "tools/mirra/model_program.h"

namespace mirra::runner {

namespace {

using simulate::Algorithm;

// The bucket caps --bucket-mb auto tries, in MiB.
constexpr double kBucketChoices[] = {1, 2, 5, 10, 25, 50, 100};

struct Replica {
  simulate::StepGraph step;
  int64_t buckets = 0;         // collectives each step
  double bucket_bytes = 0;     // their bytes together
};

// Replica 0's step of `model` under the command's strategy with buckets of `bucket_mb`.
graph::Expected<Replica> replica_step(const SimulateCommand& command, const serialization::Model& model,
                                      const simulate::ClusterSpec& cluster, const simulate::MeasuredCosts* measured,
                                      double bucket_mb) {
  const bool replicated = command.strategy != "one_device";
  const std::vector<std::string> devices =
      replicated ? command.devices : std::vector<std::string>(command.devices.begin(), command.devices.begin() + 1);
  const nlohmann::json config_json = {{"strategy", replicated ? "mirrored" : "one_device"},
                                      {"devices", devices},
                                      {"all_reduce", {{"bucket_mb", bucket_mb}, {"first_bucket_mb", std::min(1.0, bucket_mb)}}}};
  MIRRA_ASSIGN_OR_RETURN(const strategies::StrategyConfig config, strategies::strategy_config_from_json(config_json, "--devices"));
  MIRRA_ASSIGN_OR_RETURN(const ops::MixedPrecision mixed_precision, ops::parse_mixed_precision(command.mixed_precision));
  MIRRA_ASSIGN_OR_RETURN(const auto strategy, strategies::make_strategy(config));
  MIRRA_ASSIGN_OR_RETURN(const ModelProgram program,
                         build_model_program(model, {.mixed_precision = mixed_precision, .devices = strategy->config().devices}));
  MIRRA_ASSIGN_OR_RETURN(const strategies::TrainingProgram distributed, strategy->distribute(program.program));
  // The step as the trainer runs it: the update and what it fetches (the loss and the metrics).
  std::vector<graph::NodeId> roots = {distributed.signature.train};
  for (const graph::ValueRef fetched : distributed.signature.step_fetches()) roots.push_back(fetched.node);
  const runtime::DimBindings dims{.batch_size = command.batch_size * static_cast<int64_t>(devices.size()),
                                  .schemas = distributed.ops};
  std::vector<graph::DeviceId> replicas;
  for (const std::string& name : devices) {
    MIRRA_ASSIGN_OR_RETURN(const graph::DeviceId device, graph::DeviceId::parse(name));
    replicas.push_back(device);
  }
  Replica r;
  MIRRA_ASSIGN_OR_RETURN(r.step, simulate::step_graph(distributed.graph, roots, dims, replicas, cluster.device, measured));
  for (const simulate::StepNode& node : r.step.nodes) {
    if (!node.collective) continue;
    ++r.buckets;
    r.bucket_bytes += node.bytes;
  }
  return r;
}

struct Point {
  simulate::ScalingPoint point;
  double bucket_mb = 0;
  int64_t collectives = 0;  // each step, with that cap
};

// Collectives each step by bucket cap (--bucket-mb auto tries several).
using CollectivesByCap = std::map<double, int64_t>;

graph::Status check_strategy(const SimulateCommand& command) {
  if (command.strategy != "mirrored" && command.strategy != "multi_worker_mirrored" && command.strategy != "one_device") {
    return graph::invalid_argument("--strategy " + command.strategy +
                                   ": simulate predicts mirrored, multi_worker_mirrored (alike: a replica per device) and "
                                   "one_device; central_storage and parameter_server are not modelled");
  }
  if (command.devices.empty()) return graph::invalid_argument("--devices names no device");
  return graph::Status();
}

// The bucket caps to simulate: --bucket-mb's, or every choice for auto.
graph::Expected<std::vector<double>> bucket_caps(const SimulateCommand& command) {
  if (command.bucket_mb == "auto") return std::vector<double>(std::begin(kBucketChoices), std::end(kBucketChoices));
  char* end = nullptr;
  const double mb = std::strtod(command.bucket_mb.c_str(), &end);
  if (end == command.bucket_mb.c_str() || *end != '\0' || !(mb > 0)) {
    return graph::invalid_argument("--bucket-mb must be a number of MiB > 0 or auto, not '" + command.bucket_mb + "'");
  }
  return std::vector<double>{mb};
}

void print_table(const SimulateCommand& command, const simulate::ClusterSpec& cluster, const Replica& replica,
                 const CollectivesByCap& by_cap, const simulate::MeasuredCosts* measured, const std::vector<Point>& points) {
  // The collectives' bytes are the same whatever the cap; their number is not.
  std::string collectives;  // "111 collectives", or "collectives: 141 (1 MiB cap), 131 (2 MiB cap), ..."
  if (by_cap.size() == 1) {
    collectives = std::to_string(by_cap.begin()->second) + " collectives";
  } else {
    for (const auto& [cap, count] : by_cap) {
      char entry[64];
      std::snprintf(entry, sizeof entry, "%s%lld (%g MiB cap)", collectives.empty() ? "collectives: " : ", ",
                    static_cast<long long>(count), cap);
      collectives += entry;
    }
  }
  std::printf("%s on %s (%d x %d %s), %lld examples per device, %.1f MiB a step in %s\n", command.model.c_str(),
              cluster.name.c_str(), cluster.nodes, cluster.devices_per_node, cluster.device.name.c_str(),
              static_cast<long long>(command.batch_size), replica.bucket_bytes / (1 << 20), collectives.c_str());
  if (measured != nullptr) {
    std::printf("kernels: %lld timed in %s (%d at once; its steps took %.3f ms), %lld by their roofline\n",
                static_cast<long long>(replica.step.measured_kernels), measured->source.c_str(), measured->concurrency,
                measured->step_seconds * 1e3, static_cast<long long>(replica.step.roofline_kernels));
  }
  std::printf("%8s  %-12s  %10s  %10s  %12s  %14s  %10s  %9s\n", "devices", "algorithm", "bucket MiB", "step ms",
              "compute ms", "exposed comm ms", "examples/s", "efficiency");
  for (const Point& p : points) {
    const simulate::ScalingPoint& s = p.point;
    std::printf("%8d  %-12s  %10g  %10.2f  %12.2f  %14.2f  %10.1f  %8.1f%%\n", s.devices,
                std::string(simulate::algorithm_name(s.algorithm)).c_str(), p.bucket_mb, s.times.step * 1e3,
                s.times.compute * 1e3, s.times.exposed_communication * 1e3, s.examples_per_second, 100 * s.efficiency);
  }
}

nlohmann::json to_json(const SimulateCommand& command, const simulate::ClusterSpec& cluster, const Replica& replica,
                       const simulate::MeasuredCosts* measured, const std::vector<Point>& points) {
  // The collectives and their bytes are the first cap's; each point says its own cap's count.
  nlohmann::json out = {{"model", command.model},
                        {"strategy", command.strategy},
                        {"cluster", cluster.name},
                        {"batch_per_device", command.batch_size},
                        {"collectives_per_step", replica.buckets},
                        {"collective_bytes_per_step", replica.bucket_bytes},
                        {"measured_kernels", replica.step.measured_kernels},
                        {"roofline_kernels", replica.step.roofline_kernels},
                        {"points", nlohmann::json::array()}};
  if (measured != nullptr) {
    out["costs"] = {{"trace", measured->source},
                    {"traced_step_s", measured->step_seconds},
                    {"kernels_at_once", measured->concurrency},
                    {"dispatch_s", measured->dispatch_seconds}};
  }
  for (const Point& p : points) {
    const simulate::ScalingPoint& s = p.point;
    out["points"].push_back({{"devices", s.devices},
                             {"algorithm", simulate::algorithm_name(s.algorithm)},
                             {"bucket_mb", p.bucket_mb},
                             {"collectives_per_step", p.collectives},
                             {"step_s", s.times.step},
                             {"compute_s", s.times.compute},
                             {"communication_s", s.times.communication},
                             {"exposed_communication_s", s.times.exposed_communication},
                             {"examples_per_s", s.examples_per_second},
                             {"efficiency", s.efficiency}});
  }
  return out;
}

graph::Status simulate_model(const SimulateCommand& command) {
  MIRRA_RETURN_IF_ERROR(check_strategy(command));
  MIRRA_ASSIGN_OR_RETURN(const std::vector<double> caps, bucket_caps(command));
  MIRRA_ASSIGN_OR_RETURN(const simulate::ClusterSpec cluster, simulate::read_cluster(command.cluster));
  std::vector<Algorithm> algorithms;
  for (const std::string& name : command.algorithms) {
    MIRRA_ASSIGN_OR_RETURN(const Algorithm a, simulate::algorithm_from_name(name));
    algorithms.push_back(a);
  }
  if (algorithms.empty()) algorithms = simulate::all_algorithms();
  std::optional<simulate::MeasuredCosts> measured;
  if (!command.costs.empty()) {
    MIRRA_ASSIGN_OR_RETURN(simulate::MeasuredCosts traced, simulate::read_measured_costs(command.costs));
    measured = std::move(traced);
  }
  const simulate::MeasuredCosts* costs = measured ? &*measured : nullptr;
  MIRRA_ASSIGN_OR_RETURN(const serialization::Model model, serialization::load_model(command.model, ops::registry()));
  const std::vector<int> counts = command.strategy == "one_device" ? std::vector<int>{1} : simulate::device_counts(cluster);
  // Each point keeps the fastest cap.
  std::vector<Point> best;
  Replica shown;
  CollectivesByCap by_cap;
  for (const double cap : caps) {
    MIRRA_ASSIGN_OR_RETURN(const Replica replica, replica_step(command, model, cluster, costs, cap));
    MIRRA_ASSIGN_OR_RETURN(const auto sweep, simulate::scaling_sweep(replica.step, cluster, counts, algorithms, command.batch_size));
    by_cap[cap] = replica.buckets;
    if (best.empty()) {
      for (const auto& s : sweep) best.push_back({s, cap, replica.buckets});
      shown = replica;
      continue;
    }
    for (size_t i = 0; i < sweep.size(); ++i) {
      if (sweep[i].times.step < best[i].point.times.step) best[i] = {sweep[i], cap, replica.buckets};
    }
  }
  if (!command.plot.empty()) {
    std::vector<simulate::ScalingPoint> plotted;
    for (const Point& p : best) plotted.push_back(p.point);
    std::ofstream file(command.plot);
    file << simulate::scaling_svg(plotted, command.model + " on " + cluster.name);
    if (!file) return graph::unavailable("--plot " + command.plot + ": cannot be written");
  }
  if (command.json) {
    std::printf("%s\n", to_json(command, cluster, shown, costs, best).dump().c_str());
  } else {
    print_table(command, cluster, shown, by_cap, costs, best);
  }
  return graph::Status();
}

}  // namespace

int run_simulate(const SimulateCommand& command) {
  const graph::Status status = simulate_model(command);
  return status.ok() ? 0 : report_error(status);
}

}  // namespace mirra::runner
