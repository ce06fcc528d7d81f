// The start-up agreement, the collective groups, and worker 0's state for every worker.
#include "tools/mirra/workers.h"

#include <nlohmann/json.hpp>

#include <algorithm>
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

// One line per collective node: name, op, attributes and operand types, less what differs between
// workers by design: which worker's part the node is (`worker`), and the shares of sharded optimizer
// state each worker's replicas hold (an all-gather's operands: its result is listed instead).
std::string collective_plan(const graph::Graph& graph) {
  std::ostringstream plan;
  for (const graph::Node& node : graph.nodes()) {
    if (!is_collective(node)) continue;
    plan << node.name << " " << node.op;
    for (const auto& [name, value] : node.attrs.entries()) {
      if (name != "worker") plan << " " << name << "=" << graph::attr_to_string(value);
    }
    if (node.op == "AllGather") {
      for (const graph::TensorType& output : node.outputs) plan << " -> " << output.to_string();
    } else {
      for (const graph::ValueRef input : node.inputs) plan << " " << graph.type(input).to_string();
    }
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
    if (!is_collective(node)) continue;
    const std::string& group = graph::checked_attr<std::string>(node, "group");
    if (std::find(groups.begin(), groups.end(), group) == groups.end()) groups.push_back(group);
  }
  return groups;
}

graph::Status agree_with_worker_0(runtime::WorkerCommunicator& workers, const RunConfig& config, const graph::Graph& graph) {
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

graph::Expected<Worker0Saves> take_worker_0_state(runtime::WorkerCommunicator& workers, runtime::Session& session,
                                                  serialization::TrainingPosition& position, const std::string& skip_variable,
                                                  double timeout_s, const std::vector<serialization::NamedTensor>& restored,
                                                  Worker0Saves saves) {
  const auto deadline = deadline_in(timeout_s);
  // Every worker's shares of sharded optimizer state, whole; then what worker 0 restored, which holds
  // the shares that only other workers' replicas keep.
  MIRRA_ASSIGN_OR_RETURN(std::vector<serialization::NamedTensor> variables,
                         gather_variables(session, skip_variable, workers, deadline));
  std::string bytes;
  if (workers.rank() == 0) {
    for (serialization::NamedTensor& v : variables) {
      const auto it = std::find_if(restored.begin(), restored.end(), [&](const auto& r) { return r.name == v.name; });
      if (it != restored.end()) v.value = it->value;
    }
    serialization::Checkpoint state{.position = position, .variables = std::move(variables)};
    MIRRA_ASSIGN_OR_RETURN(const flatbuffers::DetachedBuffer buffer, serialization::serialize_checkpoint(state));
    bytes.assign(reinterpret_cast<const char*>(buffer.data()), buffer.size());
    bytes += static_cast<char>(saves.checkpoints);
    bytes += static_cast<char>(saves.model);
  }
  MIRRA_RETURN_IF_ERROR(workers.broadcast_bytes(bytes, deadline));
  if (workers.rank() == 0) return saves;
  if (bytes.size() < 2) return graph::internal_error("worker 0's state is empty");
  saves = {.checkpoints = bytes[bytes.size() - 2] != 0, .model = bytes.back() != 0};
  bytes.resize(bytes.size() - 2);
  MIRRA_ASSIGN_OR_RETURN(const serialization::Checkpoint state,
                         serialization::parse_checkpoint({reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()},
                                                         "worker 0's state"));
  MIRRA_RETURN_IF_ERROR(write_variables(session, state.variables, /*require_all=*/true, "worker 0's state", skip_variable,
                                        {.worker = workers.rank(), .workers = workers.world_size()}));
  position = state.position;
  return saves;
}

}  // namespace mirra::runner
