// StepProfile: each step's timeline cut by device and role, and the means per step.
#include "tools/mirra/step_profile.h"

#include <algorithm>
#include <cstdio>

#include "tools/mirra/node_roles.h"

namespace mirra::runner {

namespace {

// The table names the ops that take longest, and sums the others.
constexpr size_t kOpsShown = 12;

double ms(double ns) { return ns / 1e6; }

}  // namespace

void StepProfile::add_step(const runtime::training::StepMetrics& step, const std::vector<runtime::NodeTiming>& timeline) {
  if (steps_ == 0 && !first_) {
    first_ = Step{step, timeline};
    return;
  }
  count(Step{step, timeline});
}

void StepProfile::count(const Step& step) {
  ++steps_;
  const double step_ns = static_cast<double>(step.metrics.step_end_ns - step.metrics.step_start_ns);
  step_ns_ += step_ns;
  data_wait_ns_ += static_cast<double>(step.metrics.step_start_ns - step.metrics.data_start_ns);
  for (const runtime::NodeTiming& timing : step.timeline) {
    if (timing.node >= graph_.size() || timing.end_ns == 0) continue;
    const double ns = static_cast<double>(std::max(timing.start_ns, timing.end_ns) - timing.start_ns);
    by_op_ns_[graph_.node(timing.node).op] += ns;
    by_node_ns_[timing.node] += ns;
    ++kernels_run_;
  }
  for (const auto& [device, time] : device_step_times(graph_, step.timeline, step_ns)) by_device_[device] += time;
}

StepProfile StepProfile::with_lone_first() const {
  StepProfile profile = *this;
  if (profile.steps_ == 0 && profile.first_) profile.count(*profile.first_);
  return profile;
}

nlohmann::json StepProfile::json() const {
  const StepProfile p = with_lone_first();
  const double steps = static_cast<double>(std::max<int64_t>(p.steps_, 1));
  double kernel_ns = 0;
  for (const auto& [op, ns] : p.by_op_ns_) kernel_ns += ns;
  std::map<std::string, size_t> nodes_of_op;  // the nodes that ran
  for (const auto& [node, ns] : p.by_node_ns_) ++nodes_of_op[graph_.node(node).op];
  std::vector<std::pair<std::string, double>> ops(p.by_op_ns_.begin(), p.by_op_ns_.end());
  std::sort(ops.begin(), ops.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  nlohmann::json by_op = nlohmann::json::array();
  for (const auto& [op, ns] : ops) {
    by_op.push_back({{"op", op},
                     {"ms", ms(ns) / steps},
                     {"share", kernel_ns > 0 ? ns / kernel_ns : 0.0},
                     {"nodes", nodes_of_op[op]}});
  }
  nlohmann::json by_device = nlohmann::json::array();
  double gaps_ns = 0;
  for (const auto& [device, time] : p.by_device_) {
    gaps_ns += time.executor_gaps_ns;
    by_device.push_back({{"device", device},
                         {"compute_ms", ms(time.compute_ns) / steps},
                         {"collective_ms", ms(time.collective_ns) / steps},
                         {"copies_ms", ms(time.copies_ns) / steps},
                         {"waiting_ms", ms(time.waiting_ns) / steps},
                         {"exposed_communication_ms", ms(time.exposed_ns) / steps}});
  }
  std::vector<std::pair<graph::NodeId, double>> nodes(p.by_node_ns_.begin(), p.by_node_ns_.end());
  std::sort(nodes.begin(), nodes.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  nlohmann::json slowest = nlohmann::json::array();
  for (size_t i = 0; i < std::min<size_t>(5, nodes.size()); ++i) {
    const graph::Node& node = graph_.node(nodes[i].first);
    slowest.push_back({{"node", node.name}, {"op", node.op}, {"device", device_of(node)}, {"ms", ms(nodes[i].second) / steps}});
  }
  return {{"steps", p.steps_},
          {"first_step_left_out", steps_ > 0},
          {"step_ms", ms(p.step_ns_) / steps},
          {"data_wait_ms", ms(p.data_wait_ns_) / steps},
          {"by_op", by_op},
          {"by_device", by_device},
          {"executor_us_per_node", p.kernels_run_ > 0 ? gaps_ns / 1e3 / static_cast<double>(p.kernels_run_) : 0.0},
          {"slowest_nodes", slowest}};
}

std::string StepProfile::table() const {
  const nlohmann::json j = json();
  std::string out;
  char line[512];
  const auto add = [&](const char* format, auto... values) {
    std::snprintf(line, sizeof line, format, values...);
    out += line;
  };
  add("profile of %lld step%s (means per step%s): step %.3f ms, waiting for the batch %.3f ms\n",
      static_cast<long long>(j["steps"].get<int64_t>()), j["steps"].get<int64_t>() == 1 ? "" : "s",
      j["first_step_left_out"].get<bool>() ? ("; " + first_step_ + ", left out").c_str() : "",
      j["step_ms"].get<double>(), j["data_wait_ms"].get<double>());
  add("  %-36s %10s %8s %6s\n", "op", "ms", "share", "nodes");
  const size_t ops = j["by_op"].size();
  double rest_ms = 0;
  for (size_t i = 0; i < ops; ++i) {
    const auto& op = j["by_op"][i];
    if (i >= kOpsShown) {
      rest_ms += op["ms"].get<double>();
      continue;
    }
    add("  %-36s %10.3f %7.1f%% %6zu\n", op["op"].get<std::string>().c_str(), op["ms"].get<double>(),
        100 * op["share"].get<double>(), op["nodes"].get<size_t>());
  }
  if (ops > kOpsShown) add("  %-36s %10.3f\n", (std::to_string(ops - kOpsShown) + " other ops").c_str(), rest_ms);
  add("  %-16s %10s %10s %10s %10s %10s\n", "device", "compute", "collective", "copies", "waiting", "exposed");
  for (const auto& d : j["by_device"]) {
    add("  %-16s %10.3f %10.3f %10.3f %10.3f %10.3f\n", d["device"].get<std::string>().c_str(), d["compute_ms"].get<double>(),
        d["collective_ms"].get<double>(), d["copies_ms"].get<double>(), d["waiting_ms"].get<double>(),
        d["exposed_communication_ms"].get<double>());
  }
  add("  executor: %.2f us per node (gaps of under 20 us between a device's kernels)\n",
      j["executor_us_per_node"].get<double>());
  add("  %10s  %-24s %-12s %s\n", "ms", "op", "device", "slowest nodes");
  for (const auto& n : j["slowest_nodes"]) {
    add("  %10.3f  %-24s %-12s %s\n", n["ms"].get<double>(), n["op"].get<std::string>().c_str(),
        n["device"].get<std::string>().c_str(), n["node"].get<std::string>().c_str());
  }
  return out;
}

}  // namespace mirra::runner
