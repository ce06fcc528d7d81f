// ClusterSpec: the tasks of a parameter-server run and which one this process is, as TensorFlow's
// TF_CONFIG says it: `MIRRA_CLUSTER` holds
//   {"cluster": {"ps": ["host:port", ...], "worker": ["host:port", ...]},
//    "task": {"type": "worker", "index": 0}, "token": "optional shared secret"}
// or the config's key "cluster" holds {"ps": [...], "worker": [...], "task": {...}, "token": "..."}
// (MIRRA_CLUSTER wins where both are given). Without a task, the process's rank under mpirun or
// srun names it: ranks 0 .. servers - 1 are the servers, the next the workers. Tasks are numbered
// servers first: ps i is task i, worker i is task (servers + i). Every error names the key and where
// it came from.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "graph/status.h"

namespace mirra::runner {

struct ClusterSpec {
  std::vector<std::string> servers;  // "ps"
  std::vector<std::string> workers;  // "worker"
  bool is_server = false;            // this process's role
  int index = 0;                     // among its role's tasks
  std::string token;

  int task() const { return is_server ? index : static_cast<int>(servers.size()) + index; }
  std::vector<std::string> addresses() const;  // by task
  std::string role() const;                    // "ps 0", "worker 1"
};

// `source` names where the text came from in errors ("MIRRA_CLUSTER").
graph::Expected<ClusterSpec> parse_cluster_spec(std::string_view json_text, std::string_view source);
// The spec MIRRA_CLUSTER holds, else `config_cluster` (the config's "cluster" object as JSON text,
// "" for none; `config_source` names it); not_found when neither is given.
graph::Expected<ClusterSpec> find_cluster_spec(std::string_view config_cluster, std::string_view config_source);

}  // namespace mirra::runner
