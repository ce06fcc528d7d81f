// ClusterSpec from MIRRA_CLUSTER's JSON (nlohmann-json): each key checked, each address a host:port.
#include "tools/mirra/cluster_spec.h"

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <set>

namespace mirra::runner {

namespace {

using json = nlohmann::json;

graph::Status key_error(std::string_view source, const std::string& key, const std::string& what) {
  return graph::invalid_argument(std::string(source) + ": '" + key + "' " + what);
}

// "host:port" with a port in 1..65535 (IPv6 hosts in brackets, as gRPC takes them).
bool is_address(const std::string& address) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == address.size() || address.size() - colon > 6) return false;
  int port = 0;
  for (size_t i = colon + 1; i < address.size(); ++i) {
    if (address[i] < '0' || address[i] > '9') return false;
    port = port * 10 + (address[i] - '0');
  }
  return port >= 1 && port <= 65535;
}

graph::Expected<std::vector<std::string>> addresses_of(const json& cluster, const std::string& role, std::string_view source) {
  const std::string key = "cluster." + role;
  if (!cluster.contains(role)) return key_error(source, key, "is missing: a list of \"host:port\"");
  const json& list = cluster.at(role);
  if (!list.is_array() || list.empty()) return key_error(source, key, "must be a non-empty list of \"host:port\"");
  std::vector<std::string> addresses;
  for (const json& entry : list) {
    if (!entry.is_string() || !is_address(entry.get<std::string>())) {
      return key_error(source, key, "holds " + entry.dump() + ", not a \"host:port\"");
    }
    addresses.push_back(entry.get<std::string>());
  }
  return addresses;
}

}  // namespace

std::vector<std::string> ClusterSpec::addresses() const {
  std::vector<std::string> all = servers;
  all.insert(all.end(), workers.begin(), workers.end());
  return all;
}

std::string ClusterSpec::role() const { return (is_server ? "ps " : "worker ") + std::to_string(index); }

graph::Expected<ClusterSpec> parse_cluster_spec(std::string_view json_text, std::string_view source) {
  const json root = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded() || !root.is_object()) return graph::invalid_argument(std::string(source) + " is not a JSON object");
  for (const auto& [key, value] : root.items()) {
    if (key != "cluster" && key != "task" && key != "token") {
      return key_error(source, key, "is not known (cluster, task, token)");
    }
  }
  if (!root.contains("cluster") || !root.at("cluster").is_object()) {
    return key_error(source, "cluster", "must be an object {\"ps\": [...], \"worker\": [...]}");
  }
  const json& cluster = root.at("cluster");
  for (const auto& [key, value] : cluster.items()) {
    if (key != "ps" && key != "worker") return key_error(source, "cluster." + key, "is not known (ps, worker)");
  }
  ClusterSpec spec;
  MIRRA_ASSIGN_OR_RETURN(spec.servers, addresses_of(cluster, "ps", source));
  MIRRA_ASSIGN_OR_RETURN(spec.workers, addresses_of(cluster, "worker", source));
  std::set<std::string> seen;
  for (const std::string& address : spec.addresses()) {
    if (!seen.insert(address).second) return key_error(source, "cluster", "names " + address + " twice: every task needs its own");
  }
  if (!root.contains("task") || !root.at("task").is_object()) {
    return key_error(source, "task", "must be an object {\"type\": \"ps\" | \"worker\", \"index\": N}");
  }
  const json& task = root.at("task");
  if (!task.contains("type") || !task.at("type").is_string() ||
      (task.at("type").get<std::string>() != "ps" && task.at("type").get<std::string>() != "worker")) {
    return key_error(source, "task.type", "must be \"ps\" or \"worker\"");
  }
  spec.is_server = task.at("type").get<std::string>() == "ps";
  const size_t count = spec.is_server ? spec.servers.size() : spec.workers.size();
  if (!task.contains("index") || !task.at("index").is_number_integer() || task.at("index").get<int64_t>() < 0 ||
      task.at("index").get<int64_t>() >= static_cast<int64_t>(count)) {
    return key_error(source, "task.index", "must be an integer in [0, " + std::to_string(count) + ")");
  }
  spec.index = task.at("index").get<int>();
  if (root.contains("token")) {
    if (!root.at("token").is_string()) return key_error(source, "token", "must be a string");
    spec.token = root.at("token").get<std::string>();
  }
  return spec;
}

graph::Expected<ClusterSpec> cluster_spec_from_environment() {
  const char* text = std::getenv("MIRRA_CLUSTER");
  if (text == nullptr) return graph::not_found("MIRRA_CLUSTER is not set");
  return parse_cluster_spec(text, "MIRRA_CLUSTER");
}

}  // namespace mirra::runner
