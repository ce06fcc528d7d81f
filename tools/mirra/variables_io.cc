// Reading and writing a session's variables by replica-free name.
#include "tools/mirra/variables_io.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "ops/optimizers.h"
#include "runtime/collectives/communicator.h"
#include "strategies/strategy.h"

namespace mirra::runner {

namespace {

// The whole shape a replica's Variable node is a flat share of (sharded optimizer state), or null. A
// node that exists once is never a share, whatever its attributes say.
const graph::Shape* shard_of(const graph::Node& node) {
  int replica = -1;
  (void)strategies::replica_free_name(node.name, &replica);
  return replica >= 0 ? node.attrs.get<graph::Shape>("shard_of") : nullptr;
}

// Per replica-free name of a sharded variable: its replicas' shares in replica order.
std::map<std::string, std::vector<const graph::Node*>, std::less<>> shards_by_name(const graph::Graph& g) {
  std::map<std::string, std::vector<const graph::Node*>, std::less<>> shards;
  for (const graph::Node& node : g.nodes()) {
    if (node.op != "Variable" || shard_of(node) == nullptr) continue;
    int replica = -1;
    const std::string_view name = strategies::replica_free_name(node.name, &replica);
    std::vector<const graph::Node*>& list = shards[std::string(name)];
    list.resize(std::max(list.size(), static_cast<size_t>(replica + 1)));
    list[static_cast<size_t>(replica)] = &node;
  }
  return shards;
}

// Elements [first, first + count) of a flat value, as a rank-1 value.
graph::TensorValue flat_part(const graph::TensorValue& value, int64_t first, int64_t count) {
  const size_t element = graph::dtype_size(value.type.dtype);
  const auto* begin = value.bytes->data() + static_cast<size_t>(first) * element;
  return {{value.type.dtype, graph::Shape{count}},
          std::make_shared<const std::vector<std::byte>>(begin, begin + static_cast<size_t>(count) * element)};
}

// The variables of the session's graph by replica-free name: whole ones (replica 0's copy), and the
// shares of sharded slots in replica order, each under its whole type.
struct SessionVariables {
  std::vector<serialization::NamedTensor> whole;
  std::map<std::string, std::pair<graph::TensorType, std::vector<graph::TensorValue>>> shares;
};

graph::Expected<SessionVariables> fetch_variables(runtime::Session& session, std::string_view skip) {
  const graph::Graph& g = session.graph();
  std::vector<std::string> names;
  std::vector<graph::ValueRef> fetches;
  for (const graph::Node& node : g.nodes()) {
    if (node.op != "Variable" || shard_of(node) != nullptr) continue;
    int replica = -1;
    const std::string_view name = strategies::replica_free_name(node.name, &replica);
    if (replica > 0 || name == skip || strategies::is_accumulator(name)) continue;
    names.emplace_back(name);
    fetches.push_back({node.id, 0});
  }
  const size_t whole_count = fetches.size();
  const auto shards = shards_by_name(g);
  for (const auto& [name, nodes] : shards) {
    for (const graph::Node* node : nodes) {
      if (node == nullptr) return graph::internal_error("variable '" + name + "' lacks a replica's share");
      fetches.push_back({node->id, 0});
    }
  }
  MIRRA_ASSIGN_OR_RETURN(const std::vector<runtime::Tensor> values, session.run({}, fetches));
  SessionVariables out;
  for (size_t i = 0; i < whole_count; ++i) out.whole.push_back({names[i], runtime::to_tensor_value(values[i])});
  size_t next = whole_count;
  for (const auto& [name, nodes] : shards) {
    auto& [type, list] = out.shares[name];
    type = {nodes.front()->outputs[0].dtype, *shard_of(*nodes.front())};
    for (size_t r = 0; r < nodes.size(); ++r) list.push_back(runtime::to_tensor_value(values[next++]));
  }
  return out;
}

// The variables sorted by name, as files hold them.
std::vector<serialization::NamedTensor> sorted(std::vector<serialization::NamedTensor> values) {
  std::sort(values.begin(), values.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  return values;
}

}  // namespace

graph::Expected<std::vector<serialization::NamedTensor>> read_variables(runtime::Session& session, std::string_view skip) {
  MIRRA_ASSIGN_OR_RETURN(SessionVariables variables, fetch_variables(session, skip));
  for (auto& [name, type_and_shares] : variables.shares) {
    // The shares, joined in replica order, are the whole variable's elements.
    const auto& [type, list] = type_and_shares;
    auto bytes = std::make_shared<std::vector<std::byte>>();
    for (const graph::TensorValue& share : list) bytes->insert(bytes->end(), share.bytes->begin(), share.bytes->end());
    if (static_cast<int64_t>(bytes->size()) != *type.shape.num_elements() * static_cast<int64_t>(graph::dtype_size(type.dtype))) {
      return graph::internal_error("variable '" + name + "' is sharded across workers; read it with gather_variables");
    }
    variables.whole.push_back({name, {type, std::move(bytes)}});
  }
  return sorted(std::move(variables.whole));
}

graph::Expected<std::vector<serialization::NamedTensor>> gather_variables(runtime::Session& session, std::string_view skip,
                                                                          runtime::WorkerCommunicator& workers,
                                                                          runtime::CollectiveClock::time_point deadline) {
  MIRRA_ASSIGN_OR_RETURN(SessionVariables variables, fetch_variables(session, skip));
  // This worker's shares, by name and replica; every worker knows every other's sizes from the cut.
  std::string mine;
  for (const auto& [name, type_and_shares] : variables.shares) {
    for (const graph::TensorValue& share : type_and_shares.second) {
      mine.append(reinterpret_cast<const char*>(share.bytes->data()), share.bytes->size());
    }
  }
  MIRRA_ASSIGN_OR_RETURN(const std::vector<std::string> all, workers.exchange(mine, deadline));
  std::vector<size_t> read(all.size(), 0);
  const int64_t worker_count = static_cast<int64_t>(all.size());
  for (const auto& [name, type_and_shares] : variables.shares) {
    const auto& [type, list] = type_and_shares;
    const int64_t elements = *type.shape.num_elements();
    const int64_t replicas = static_cast<int64_t>(list.size());
    const size_t element = graph::dtype_size(type.dtype);
    auto bytes = std::make_shared<std::vector<std::byte>>();
    bytes->reserve(static_cast<size_t>(elements) * element);
    for (int64_t r = 0; r < replicas; ++r) {
      for (int64_t w = 0; w < worker_count; ++w) {
        const size_t size = static_cast<size_t>(runtime::worker_share(elements, replicas, r, worker_count, w).count) * element;
        const std::string& from = all[static_cast<size_t>(w)];
        if (read[static_cast<size_t>(w)] + size > from.size()) {
          return graph::internal_error("worker " + std::to_string(w) + " sent too few shares of '" + name + "'");
        }
        const auto* begin = reinterpret_cast<const std::byte*>(from.data() + read[static_cast<size_t>(w)]);
        bytes->insert(bytes->end(), begin, begin + size);
        read[static_cast<size_t>(w)] += size;
      }
    }
    variables.whole.push_back({name, {type, std::move(bytes)}});
  }
  return sorted(std::move(variables.whole));
}

graph::Status check_values(const std::vector<serialization::NamedTensor>& values, std::string_view source) {
  for (const serialization::NamedTensor& v : values) {
    int64_t non_finite = 0;
    if (v.value.type.dtype == graph::DType::f32) {
      for (float x : v.value.values<float>()) non_finite += !std::isfinite(x);
    } else if (v.value.type.dtype == graph::DType::f64) {
      for (double x : v.value.values<double>()) non_finite += !std::isfinite(x);
    }
    if (non_finite > 0) {
      return graph::invalid_argument(std::string(source) + ": '" + v.name + "' holds " + std::to_string(non_finite) +
                                     " NaN or infinite values");
    }
    if (v.name == ops::kIterationsVariable && v.value.type.dtype == graph::DType::i64 &&
        std::any_of(v.value.values<int64_t>().begin(), v.value.values<int64_t>().end(), [](int64_t n) { return n < 0; })) {
      return graph::invalid_argument(std::string(source) + ": the optimizer's iteration count '" + v.name + "' is negative");
    }
  }
  return graph::Status();
}

graph::Status write_variables(runtime::Session& session, const std::vector<serialization::NamedTensor>& values,
                              bool require_all, std::string_view source, std::string_view skip, const ops::WorkerPart& part) {
  MIRRA_RETURN_IF_ERROR(check_values(values, source));
  std::map<std::string, const serialization::NamedTensor*, std::less<>> by_name;
  for (const auto& v : values) by_name[v.name] = &v;
  std::set<std::string, std::less<>> used;
  const auto shards = shards_by_name(session.graph());
  for (const graph::Node& node : session.graph().nodes()) {
    if (node.op != "Variable") continue;
    const std::string_view name = strategies::stored_variable_name(node);
    const graph::Shape* rows_of = node.attrs.get<graph::Shape>("partition_of");
    if (name == skip || strategies::is_accumulator(name)) continue;
    const auto it = by_name.find(name);
    if (it == by_name.end()) {
      if (require_all && !ops::is_loss_scale_variable(name)) return graph::invalid_argument(std::string(source) + " has no value for variable '" + std::string(name) + "'");
      continue;
    }
    const graph::TensorValue& value = it->second->value;
    const graph::TensorType whole = shard_of(node) ? graph::TensorType{node.outputs[0].dtype, *shard_of(node)}
                                    : rows_of      ? graph::TensorType{node.outputs[0].dtype, *rows_of}
                                                   : node.outputs[0];
    if (!(value.type == whole)) {
      return graph::invalid_argument(std::string(source) + ": variable '" + std::string(name) + "' is " +
                                     value.type.to_string() + ", but the model's is " + whole.to_string());
    }
    if (rows_of != nullptr) {
      const int64_t row = *whole.shape.num_elements() / std::max<int64_t>(1, whole.shape.dim(0));
      const int64_t first = *node.attrs.get<int64_t>("partition_offset");
      graph::TensorValue rows = flat_part(value, first * row, *node.outputs[0].shape.num_elements());
      rows.type.shape = node.outputs[0].shape;
      session.assign_variable(node.name, runtime::from_tensor_value(rows));
    } else if (shard_of(node) == nullptr) {
      session.assign_variable(node.name, runtime::from_tensor_value(value));
    } else {
      // Replica r's share of the whole value (runtime::worker_share's cut).
      int replica = -1;
      (void)strategies::replica_free_name(node.name, &replica);
      const int64_t replicas = static_cast<int64_t>(shards.find(name)->second.size());
      const runtime::ShareRange share = runtime::worker_share(*whole.shape.num_elements(), replicas, replica, part.workers, part.worker);
      if (!(node.outputs[0].shape == graph::Shape{share.count})) {
        return graph::internal_error("variable '" + node.name + "' is " + node.outputs[0].to_string() + ", not share " +
                                     std::to_string(replica) + " of " + std::to_string(replicas) + " of " +
                                     whole.to_string() + " on worker " + std::to_string(part.worker) + " of " +
                                     std::to_string(part.workers));
      }
      session.assign_variable(node.name, runtime::from_tensor_value(flat_part(value, share.first, share.count)));
    }
    used.insert(it->first);
  }
  for (const auto& v : values) {
    if (!used.contains(v.name) && v.name != skip && !ops::is_loss_scale_variable(v.name)) {
      return graph::invalid_argument(std::string(source) + " holds '" + v.name + "', which is no variable of this model");
    }
  }
  return graph::Status();
}

graph::Expected<std::vector<serialization::NamedTensor>> join_partitions(std::vector<serialization::NamedTensor> values,
                                                                         const graph::Graph& cluster) {
  struct Part {
    int64_t offset;
    const graph::Node* node;
  };
  std::map<std::string, std::vector<Part>, std::less<>> parts_by_whole;
  for (const graph::Node& node : cluster.nodes()) {
    if (node.op != "Variable" || !node.attrs.contains("partition_of")) continue;
    parts_by_whole[std::string(strategies::stored_variable_name(node))].push_back({*node.attrs.get<int64_t>("partition_offset"), &node});
  }
  std::map<std::string, const graph::TensorValue*, std::less<>> by_name;
  for (const serialization::NamedTensor& v : values) by_name[v.name] = &v.value;
  std::vector<serialization::NamedTensor> joined;
  for (auto& [name, parts] : parts_by_whole) {
    std::sort(parts.begin(), parts.end(), [](const Part& a, const Part& b) { return a.offset < b.offset; });
    const graph::TensorType type{parts.front().node->outputs[0].dtype, *parts.front().node->attrs.get<graph::Shape>("partition_of")};
    auto bytes = std::make_shared<std::vector<std::byte>>();
    for (const Part& part : parts) {
      const auto found = by_name.find(part.node->name);
      if (found == by_name.end() || !(found->second->type == part.node->outputs[0])) {
        return graph::internal_error("variable '" + name + "' lacks its part '" + part.node->name + "' (" +
                                     part.node->outputs[0].to_string() + ")");
      }
      bytes->insert(bytes->end(), found->second->bytes->begin(), found->second->bytes->end());
    }
    if (static_cast<int64_t>(bytes->size()) != *type.shape.num_elements() * static_cast<int64_t>(graph::dtype_size(type.dtype))) {
      return graph::internal_error("the parts of variable '" + name + "' do not fill " + type.to_string());
    }
    joined.push_back({name, {type, std::move(bytes)}});
  }
  std::erase_if(values, [&](const serialization::NamedTensor& v) {
    int part = -1;
    return parts_by_whole.contains(strategies::partition_free_name(v.name, &part)) && part >= 0;
  });
  values.insert(values.end(), std::make_move_iterator(joined.begin()), std::make_move_iterator(joined.end()));
  return sorted(std::move(values));
}

std::set<std::string, std::less<>> variable_names(const graph::Graph& g) {
  std::set<std::string, std::less<>> names;
  for (const graph::Node& node : g.nodes()) {
    if (node.op == "Variable") names.emplace(strategies::stored_variable_name(node));
  }
  return names;
}

serialization::Model trained_model(const serialization::Model& model, const ops::Optimizer& optimizer,
                                   std::vector<serialization::NamedTensor> values) {
  serialization::Model trained{.graph = model.graph, .signature = model.signature, .metadata = model.metadata};
  trained.signature.optimizer.state.clear();
  trained.signature.optimizer.hyper_parameters = ops::optimizer_hyper_parameters(optimizer);
  for (auto& value : values) {
    const auto id = trained.graph.find(value.name);
    if (id && trained.graph.node(*id).op == "Variable") {
      trained.weights.push_back(std::move(value));
    } else {
      trained.signature.optimizer.state.push_back(std::move(value));
    }
  }
  trained.metadata.producer.clear();
  trained.metadata.created.clear();
  return trained;
}

}  // namespace mirra::runner
