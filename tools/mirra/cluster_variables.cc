// ClusterVariables: gathering the servers' variables on server 0, and handing a checkpoint or the
// values to evaluate out from it, as Sends and Recvs of the cluster's transfers outside the steps'
// groups ("save/...", "resume/...", "evaluate/...").
#include "tools/mirra/cluster_variables.h"

#include <chrono>

#include "ops/optimizers.h"
#include "ops/task_partition.h"
#include "strategies/strategy.h"
#include "tools/mirra/variables_io.h"

namespace mirra::runner {

namespace {

using serialization::NamedTensor;
using serialization::TrainingPosition;

// What server 0 tells every task before it resumes: no checkpoint, the checkpoint's position, or
// that it could not resume (why is in its log and its exit status).
enum class Resumption : int64_t { none = 0, resumed = 1, failed = 2 };

runtime::Tensor position_tensor(Resumption resumption, const TrainingPosition& p) {
  return runtime::Tensor::from<int64_t>({6}, {static_cast<int64_t>(resumption), p.step, p.epoch, p.batch_in_epoch,
                                              static_cast<int64_t>(p.data_seed), p.batch_size});
}

// The names, one per line, as bytes.
runtime::Tensor names_tensor(const std::vector<std::string>& names) {
  std::string text;
  for (const std::string& name : names) text += name + "\n";
  return runtime::Tensor::from<uint8_t>({static_cast<int64_t>(text.size())},
                                        std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(text.data()), text.size()));
}

std::vector<std::string> names_of(const runtime::Tensor& tensor) {
  std::vector<std::string> names;
  std::string name;
  for (uint8_t c : tensor.values<uint8_t>()) {
    if (c != '\n') {
      name.push_back(static_cast<char>(c));
      continue;
    }
    names.push_back(std::move(name));
    name.clear();
  }
  return names;
}

}  // namespace

runtime::CollectiveCall ClusterVariables::call(const std::string& group, int64_t instance, int participant, int peer) const {
  return {.group = group,
          .instance = instance,
          .participant = participant,
          .group_size = 2,
          .peer = peer,
          .deadline = runtime::deadline_after(std::chrono::milliseconds(static_cast<int64_t>(options_.timeout_s * 1000)))};
}

graph::Expected<std::vector<NamedTensor>> ClusterVariables::gather(runtime::Session& session) {
  const int64_t instance = gatherings_++;
  MIRRA_ASSIGN_OR_RETURN(std::vector<NamedTensor> values, read_variables(session, options_.skip));
  if (options_.task != 0) {
    for (const NamedTensor& value : values) {
      MIRRA_RETURN_IF_ERROR(transfers_.send(call("save/" + value.name, instance, 0, 0), runtime::from_tensor_value(value.value))->wait());
    }
    return values;
  }
  for (const graph::Node& node : options_.cluster->nodes()) {
    const int server = ops::task_of(node);
    if (node.op != "Variable" || server == 0 || server >= options_.servers) continue;
    int replica = -1;
    const std::string_view name = strategies::replica_free_name(node.name, &replica);
    if (name == options_.skip || strategies::is_accumulator(name)) continue;
    runtime::Tensor received;
    MIRRA_RETURN_IF_ERROR(transfers_.recv(call("save/" + std::string(name), instance, 1, server), received)->wait());
    values.push_back({std::string(name), runtime::to_tensor_value(received)});
  }
  return join_partitions(std::move(values), *options_.cluster);
}

graph::Expected<std::optional<TrainingPosition>> ClusterVariables::resume(
    runtime::Session& session, const graph::Expected<std::optional<serialization::Checkpoint>>& latest) {
  if (options_.task == 0) {
    MIRRA_RETURN_IF_ERROR(resume_from_server_0(session, latest));
    return latest->has_value() ? std::optional<TrainingPosition>((*latest)->position) : std::nullopt;
  }
  runtime::Tensor position;
  MIRRA_RETURN_IF_ERROR(transfers_.recv(call("resume/position", 0, 1, 0), position)->wait());
  if (position.dtype() != graph::DType::i64 || position.num_elements() != 6) {
    return graph::internal_error("server 0 sent a malformed training position (" + position.type_string() + ")");
  }
  const std::vector<int64_t> p = position.to_vector<int64_t>();
  if (p[0] == static_cast<int64_t>(Resumption::failed)) {
    return graph::failed_precondition("server 0 could not resume from its checkpoint (its log says why)");
  }
  if (p[0] == static_cast<int64_t>(Resumption::none)) return std::optional<TrainingPosition>();
  MIRRA_ASSIGN_OR_RETURN(const std::vector<NamedTensor> values, receive_values("resume/", 0));
  MIRRA_RETURN_IF_ERROR(write_variables(session, values, /*require_all=*/true, "server 0's checkpoint", options_.skip));
  return std::optional<TrainingPosition>(
      {.step = p[1], .epoch = p[2], .batch_in_epoch = p[3], .data_seed = static_cast<uint64_t>(p[4]), .batch_size = p[5]});
}

graph::Status ClusterVariables::resume_from_server_0(runtime::Session& session,
                                                    const graph::Expected<std::optional<serialization::Checkpoint>>& latest) {
  const bool resuming = latest.ok() && latest->has_value();
  const serialization::Checkpoint empty;
  const serialization::Checkpoint& checkpoint = resuming ? **latest : empty;
  std::map<std::string_view, const NamedTensor*> by_name;
  for (const NamedTensor& value : checkpoint.variables) by_name[value.name] = &value;
  // Each task's values, every variable it holds found before anything is sent.
  std::map<int, std::vector<std::string>> names;
  graph::Status problem = latest.status();
  if (resuming) problem = names_by_task(by_name, names);
  if (problem.ok() && resuming) {
    std::vector<NamedTensor> own;
    for (const std::string& name : names[0]) own.push_back(*by_name.at(name));
    problem = write_variables(session, own, /*require_all=*/true, "the checkpoint", options_.skip);
  }
  const Resumption resumption = !problem.ok() ? Resumption::failed : resuming ? Resumption::resumed : Resumption::none;
  for (int task = 1; task < transfers_.world_size(); ++task) {
    MIRRA_RETURN_IF_ERROR(transfers_.send(call("resume/position", 0, 0, task), position_tensor(resumption, checkpoint.position))->wait());
  }
  MIRRA_RETURN_IF_ERROR(problem);
  if (!resuming) return graph::Status();
  for (int task = 1; task < transfers_.world_size(); ++task) {
    std::vector<const NamedTensor*> values;
    for (const std::string& name : names[task]) values.push_back(by_name.at(name));
    MIRRA_RETURN_IF_ERROR(send_values(task, "resume/", 0, values));
  }
  return graph::Status();
}

graph::Status ClusterVariables::names_by_task(const std::map<std::string_view, const NamedTensor*>& values,
                                             std::map<int, std::vector<std::string>>& names) const {
  for (const auto& [task, held] : options_.held) {
    for (const std::string& name : held) {
      if (name == options_.skip || strategies::is_accumulator(name)) continue;
      if (values.contains(name)) {
        names[task].push_back(name);
      } else if (!ops::is_loss_scale_variable(name)) {
        return graph::invalid_argument("the checkpoint has no value for variable '" + name + "' (held by task " +
                                       std::to_string(task) + ")");
      }
    }
  }
  return graph::Status();
}

graph::Status ClusterVariables::send_for_evaluation(const std::vector<NamedTensor>& values, int task) {
  const int64_t instance = evaluations_++;
  if (options_.task != 0) return graph::Status();
  std::vector<const NamedTensor*> all;
  for (const NamedTensor& value : values) all.push_back(&value);
  return send_values(task, "evaluate/", instance, all);
}

graph::Expected<std::vector<NamedTensor>> ClusterVariables::receive_for_evaluation() {
  return receive_values("evaluate/", evaluations_++);
}

graph::Status ClusterVariables::send_values(int task, const std::string& prefix, int64_t instance,
                                            const std::vector<const NamedTensor*>& values) {
  std::vector<std::string> names;
  for (const NamedTensor* value : values) names.push_back(value->name);
  MIRRA_RETURN_IF_ERROR(transfers_.send(call(prefix + "names", instance, 0, task), names_tensor(names))->wait());
  for (const NamedTensor* value : values) {
    MIRRA_RETURN_IF_ERROR(transfers_.send(call(prefix + value->name, instance, 0, task), runtime::from_tensor_value(value->value))->wait());
  }
  return graph::Status();
}

graph::Expected<std::vector<NamedTensor>> ClusterVariables::receive_values(const std::string& prefix, int64_t instance) {
  runtime::Tensor names;
  MIRRA_RETURN_IF_ERROR(transfers_.recv(call(prefix + "names", instance, 1, 0), names)->wait());
  if (names.dtype() != graph::DType::u8 || names.rank() != 1) {
    return graph::internal_error("server 0 sent malformed variable names (" + names.type_string() + ")");
  }
  std::vector<NamedTensor> values;
  for (const std::string& name : names_of(names)) {
    runtime::Tensor value;
    MIRRA_RETURN_IF_ERROR(transfers_.recv(call(prefix + name, instance, 1, 0), value)->wait());
    values.push_back({name, runtime::to_tensor_value(value)});
  }
  return values;
}

}  // namespace mirra::runner
