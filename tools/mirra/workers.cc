// The start-up agreement, the collective groups, and worker 0's state for every worker.
#include "tools/mirra/workers.h"

#include <nlohmann/json.hpp>

#include <sstream>

#include "graph/op_schema.h"
#include "ops/registry.h"
#include "tools/mirra/variables_io.h"

namespace mirra::runner {

namespace {

runtime::CollectiveClock::time_point deadline_in(double seconds) {
  return runtime::deadline_after(std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000)));
}

// The config as the agreement compares it, one key per line.
std::string agreed_config(const RunConfig& config) {
  nlohmann::json json = nlohmann::json::parse(run_config_json(config));
  json["training"].erase("data");
  json["training"].erase("threads");
  json["checkpoint"].erase("dir");
  return json.dump(2);
}

bool is_collective(const graph::Node& node) {
  const graph::OpSchema* schema = ops::registry().find(node.op);
  return schema != nullptr && schema->has(graph::kCollective);
}

// One line per collective node: name, op, attributes and operand types.
std::string collective_plan(const graph::Graph& graph) {
  std::ostringstream plan;
  for (const graph::Node& node : graph.nodes()) {
    if (!is_collective(node)) continue;
    plan << node.name << " " << node.op;
    for (const auto& [name, value] : node.attrs.entries()) plan << " " << name << "=" << graph::attr_to_string(value);
    for (const graph::ValueRef input : node.inputs) plan << " " << graph.type(input).to_string();
    plan << "\n";
  }
  return plan.str();
}

// The first line where `text` and `reference` differ, as "line N: 'here' here, 'there' on worker 0".
std::string first_difference(const std::string& text, const std::string& reference) {
  std::istringstream a(text), b(reference);
  std::string here, there;
  for (int line = 1;; ++line) {
    const bool more_here = static_cast<bool>(std::getline(a, here));
    const bool more_there = static_cast<bool>(std::getline(b, there));
    if (!more_here && !more_there) return "they differ";
    if (!more_here) here = "(nothing)";
    if (!more_there) there = "(nothing)";
    if (here != there || !more_here || !more_there) {
      return "line " + std::to_string(line) + ": '" + here + "' there, '" + there + "' on worker 0";
    }
  }
}

}  // namespace

std::vector<std::string> collective_groups(const graph::Graph& graph) {
  std::vector<std::string> groups;
  for (const graph::Node& node : graph.nodes()) {
    if (is_collective(node)) groups.push_back(node.name);
  }
  return groups;
}

graph::Status agree_with_worker_0(runtime::WorkerCollective& workers, const RunConfig& config, const graph::Graph& graph) {
  const auto deadline = deadline_in(config.strategy.all_reduce.timeout_s);
  const std::pair<const char*, std::string> parts[] = {{"config", agreed_config(config)},
                                                       {"collective plan", collective_plan(graph)}};
  for (const auto& [what, mine] : parts) {
    MIRRA_ASSIGN_OR_RETURN(const std::vector<std::string> all, workers.exchange(mine, deadline));
    for (size_t r = 1; r < all.size(); ++r) {
      if (all[r] == all[0]) continue;
      return graph::invalid_argument("worker " + std::to_string(r) + "'s " + what + " differs from worker 0's (" +
                                     first_difference(all[r], all[0]) + "); every worker must run the same model and config");
    }
  }
  return graph::Status();
}

graph::Status take_worker_0_state(runtime::WorkerCollective& workers, runtime::Session& session,
                                  serialization::TrainingPosition& position, const std::string& skip_variable,
                                  double timeout_s) {
  std::string bytes;
  if (workers.rank() == 0) {
    serialization::Checkpoint state{.position = position};
    MIRRA_ASSIGN_OR_RETURN(state.variables, read_variables(session, skip_variable));
    MIRRA_ASSIGN_OR_RETURN(const flatbuffers::DetachedBuffer buffer, serialization::serialize_checkpoint(state));
    bytes.assign(reinterpret_cast<const char*>(buffer.data()), buffer.size());
  }
  MIRRA_RETURN_IF_ERROR(workers.broadcast_bytes(bytes, deadline_in(timeout_s)));
  if (workers.rank() == 0) return graph::Status();
  MIRRA_ASSIGN_OR_RETURN(const serialization::Checkpoint state,
                         serialization::parse_checkpoint({reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()},
                                                         "worker 0's state"));
  MIRRA_RETURN_IF_ERROR(write_variables(session, state.variables, /*require_all=*/true, "worker 0's state", skip_variable));
  position = state.position;
  return graph::Status();
}

}  // namespace mirra::runner
