// ClusterSpec from MIRRA_CLUSTER's JSON (nlohmann-json): each key checked, each address a host:port.
#include "tools/mirra/cluster_spec.h"

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <optional>
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

graph::Expected<std::vector<std::string>> addresses_of(const json& cluster, const std::string& role, const std::string& prefix,
                                                       std::string_view source) {
  const std::string key = prefix + role;
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


// The rank mpirun (OpenMPI, PMIx) or srun gave this process, if one did.
std::optional<int64_t> launcher_rank() {
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "SLURM_PROCID"}) {
    const char* value = std::getenv(name);
    if (value == nullptr || *value == '\0') continue;
    char* end = nullptr;
    const long long rank = std::strtoll(value, &end, 10);
    if (*end == '\0' && rank >= 0) return rank;
  }
  return std::nullopt;
}

// The spec from `cluster` ({"ps": [...], "worker": [...]}), `task` (null: the launcher's rank) and
// `token` (null: none); `prefix` is what the keys of `cluster` are named under in errors.
graph::Expected<ClusterSpec> spec_of(const json& cluster, const json* task, const json* token, std::string_view source,
                                     const std::string& prefix, const std::string& task_key, const std::string& token_key) {
  ClusterSpec spec;
  MIRRA_ASSIGN_OR_RETURN(spec.servers, addresses_of(cluster, "ps", prefix, source));
  MIRRA_ASSIGN_OR_RETURN(spec.workers, addresses_of(cluster, "worker", prefix, source));
  std::set<std::string> seen;
  for (const std::string& address : spec.addresses()) {
    if (!seen.insert(address).second) {
      return key_error(source, prefix.empty() ? "cluster" : prefix.substr(0, prefix.size() - 1),
                       "names " + address + " twice: every task needs its own");
    }
  }
  if (task == nullptr) {
    const std::optional<int64_t> rank = launcher_rank();
    if (!rank) {
      return key_error(source, task_key, "is missing, and no launcher (mpirun, srun) gave this process a rank to take it from");
    }
    const int64_t servers = static_cast<int64_t>(spec.servers.size());
    if (*rank >= servers + static_cast<int64_t>(spec.workers.size())) {
      return key_error(source, task_key, "is missing, and this process's rank " + std::to_string(*rank) +
                                             " is not below the cluster's " + std::to_string(spec.addresses().size()) + " tasks");
    }
    spec.is_server = *rank < servers;
    spec.index = static_cast<int>(spec.is_server ? *rank : *rank - servers);
  } else {
    if (!task->is_object() || !task->contains("type") || !task->at("type").is_string() ||
        (task->at("type").get<std::string>() != "ps" && task->at("type").get<std::string>() != "worker")) {
      return key_error(source, task_key + ".type", "must be \"ps\" or \"worker\"");
    }
    spec.is_server = task->at("type").get<std::string>() == "ps";
    const size_t count = spec.is_server ? spec.servers.size() : spec.workers.size();
    if (!task->contains("index") || !task->at("index").is_number_integer() || task->at("index").get<int64_t>() < 0 ||
        task->at("index").get<int64_t>() >= static_cast<int64_t>(count)) {
      return key_error(source, task_key + ".index", "must be an integer in [0, " + std::to_string(count) + ")");
    }
    spec.index = task->at("index").get<int>();
  }
  if (token != nullptr) {
    if (!token->is_string()) return key_error(source, token_key, "must be a string");
    spec.token = token->get<std::string>();
  }
  return spec;
}

graph::Status check_keys(const json& object, std::initializer_list<const char*> known, std::string_view source,
                         const std::string& prefix) {
  for (const auto& [key, value] : object.items()) {
    bool found = false;
    std::string names;
    for (const char* k : known) {
      found = found || key == k;
      names += (names.empty() ? "" : ", ") + std::string(k);
    }
    if (!found) return key_error(source, prefix + key, "is not known (" + names + ")");
  }
  return graph::Status();
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
  MIRRA_RETURN_IF_ERROR(check_keys(root, {"cluster", "task", "token"}, source, ""));
  if (!root.contains("cluster") || !root.at("cluster").is_object()) {
    return key_error(source, "cluster", "must be an object {\"ps\": [...], \"worker\": [...]}");
  }
  MIRRA_RETURN_IF_ERROR(check_keys(root.at("cluster"), {"ps", "worker"}, source, "cluster."));
  return spec_of(root.at("cluster"), root.contains("task") ? &root.at("task") : nullptr,
                 root.contains("token") ? &root.at("token") : nullptr, source, "cluster.", "task", "token");
}

graph::Expected<ClusterSpec> find_cluster_spec(std::string_view config_cluster, std::string_view config_source) {
  if (const char* text = std::getenv("MIRRA_CLUSTER"); text != nullptr) return parse_cluster_spec(text, "MIRRA_CLUSTER");
  if (config_cluster.empty()) return graph::not_found("no cluster: set MIRRA_CLUSTER, or the config's key 'cluster'");
  const json cluster = json::parse(config_cluster, nullptr, /*allow_exceptions=*/false);
  if (cluster.is_discarded() || !cluster.is_object()) return key_error(config_source, "cluster", "must be an object");
  MIRRA_RETURN_IF_ERROR(check_keys(cluster, {"ps", "worker", "task", "token"}, config_source, "cluster."));
  return spec_of(cluster, cluster.contains("task") ? &cluster.at("task") : nullptr,
                 cluster.contains("token") ? &cluster.at("token") : nullptr, config_source, "cluster.", "cluster.task",
                 "cluster.token");
}

}  // namespace mirra::runner
