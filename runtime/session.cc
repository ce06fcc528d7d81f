// Session: feed checks, the plan cache and the task arena (whose threads flush subnormals).
#include "runtime/session.h"

#include <algorithm>
#include <cstring>
#include <set>

#include <oneapi/tbb/info.h>
#include <oneapi/tbb/task_arena.h>

#include "runtime/collectives/communicator_registry.h"
#include "runtime/collectives/in_process_communicator.h"
#include "runtime/denormals.h"
#include "runtime/device_kinds.h"
#include "runtime/placement.h"

namespace mirra::runtime {

namespace {

// The devices the graph names, with the default device, and cpu:0 where soft placement may move
// nodes (of this task; placement refuses the others'). The logical CPU devices cpu:0 .. cpu:N all
// exist up to the highest one named.
std::vector<graph::DeviceId> devices_needed(const graph::Graph& graph, const SessionOptions& options) {
  std::set<graph::DeviceId> ids;
  if (!options.default_device.task) ids.insert(options.default_device);
  if (options.soft_placement) ids.insert({DeviceKind::cpu, 0});
  for (const graph::Node& node : graph.nodes()) {
    if (node.device && !node.device->task) ids.insert(*node.device);
  }
  int cpus = 0;
  for (const graph::DeviceId& id : ids) {
    if (id.kind == DeviceKind::cpu) cpus = std::max(cpus, id.ordinal + 1);
  }
  for (int i = 0; i < cpus; ++i) ids.insert({DeviceKind::cpu, i});
  return {ids.begin(), ids.end()};
}

// The options with the default device named as a local one when it is this task's.
SessionOptions with_local_default(SessionOptions options) {
  options.default_device = local(options.default_device, options.task);
  return options;
}

// The graph with this task's devices named as local ones (no task), so that /task:0/gpu:0 and gpu:0
// are one device in task 0.
graph::Graph with_local_devices(const graph::Graph& graph, int task) {
  graph::Graph copy = graph;
  for (graph::NodeId id = 0; id < copy.size(); ++id) {
    graph::Node& node = copy.mutable_node(id);
    if (node.device) node.device = local(*node.device, task);
  }
  return copy;
}

std::string request_key(const std::vector<graph::NodeId>& fed, std::span<const graph::ValueRef> fetches,
                        std::span<const graph::NodeId> targets) {
  std::string key;
  for (auto id : fed) key += std::to_string(id) + ",";
  key += "|";
  for (auto value : fetches) key += std::to_string(value.node) + ":" + std::to_string(value.output) + ",";
  key += "|";
  for (auto id : targets) key += std::to_string(id) + ",";
  return key;
}

// The session's own communicators (the first is "auto"), then one of each registered communicator,
// then the peer communicator of each kind among its devices that has one (NCCL's for GPUs).
CommunicatorSet session_communicators(const SessionOptions& options, const DeviceSet& devices) {
  CommunicatorSet set;
  for (const auto& communicator : options.communicators) set.add(communicator);
  if (options.communicators.empty()) set.add(std::make_shared<InProcessCommunicator>());
  for (const auto& [name, make] : registered_communicators()) set.add(make());
  std::set<graph::DeviceKind> kinds;
  for (const auto& device : devices.devices()) {
    const DeviceKindSpec* spec = find_device_kind_spec(device->id().kind);
    if (spec == nullptr || !spec->make_peer_communicator || !kinds.insert(device->id().kind).second) continue;
    if (std::shared_ptr<Communicator> peer = spec->make_peer_communicator()) set.add(std::move(peer));
  }
  return set;
}

int session_threads(const SessionOptions& options) {
  if (options.deterministic) return 1;
  return options.threads > 0 ? options.threads : oneapi::tbb::info::default_concurrency();
}

}  // namespace

Session::Session(const graph::Graph& graph, const KernelRegistry& kernels, SessionOptions options)
    : graph_(with_local_devices(graph, options.task)), kernels_(kernels), options_(with_local_default(options)),
      trace_(options.trace),
      devices_(DeviceSet::create(devices_needed(graph_, options_), session_threads(options),
                                 options.memory_limit > 0 ? std::make_shared<MemoryBudget>(options.memory_limit) : nullptr,
                                 {.allow_tf32 = options.allow_tf32,
                                  .logical_gpus_per_gpu = options.logical_gpus_per_gpu,
                                  .deterministic = options.deterministic})),
      prepared_(devices_.status().ok()
                    ? prepare_graph(graph_, kernels, devices_, {options_.default_device, options.soft_placement})
                    : devices_.status()),
      communicators_(session_communicators(options, devices_)), resources_{variables_, communicators_},
      arena_(make_task_arena(session_threads(options), options.flush_denormals)) {}

Session::~Session() = default;

Tensor Session::to_host(const Tensor& tensor) const {
  if (!tensor.defined()) return tensor;
  const Device* owner = devices_.owner_of(tensor.memory_space());
  return owner == nullptr ? tensor : owner->copy_to_host(tensor);
}

std::optional<Tensor> Session::read_variable(const std::string& name) const {
  const std::optional<Tensor> value = variables_.find(name);
  if (!value) return value;
  const bool on_host = devices_.owner_of(value->memory_space()) == nullptr;
  return on_host ? host_copy(*value) : to_host(*value);
}

void Session::assign_variable(const std::string& name, const Tensor& value) {
  const std::optional<graph::NodeId> id = graph_.find(name);
  const Device* device = id && graph_.node(*id).device ? devices_.find(*graph_.node(*id).device) : nullptr;
  const bool on_device = device != nullptr && !device->memory_space().host;
  std::optional<Tensor> existing = variables_.find(name);
  if (existing && existing->dtype() == value.dtype() && existing->shape() == value.shape() &&
      existing->memory_space() == (on_device ? device->memory_space() : MemorySpace::host_memory())) {
    if (!on_device) {
      if (value.byte_size() > 0) std::memcpy(existing->mutable_raw_data(), value.raw_data(), value.byte_size());
      return;
    }
    const Tensor staged = device->copy_from_host(value);
    const graph::Status copied = device->enqueue_copy(staged, *existing);
    if (!copied.ok()) throw DeviceError(copied);
    device->compute_stream().synchronize();
    return;
  }
  variables_.set(name, on_device ? device->copy_from_host(value) : host_copy(value));
  // Recorded steps would go on reading the buffer it had.
  std::lock_guard lock(executors_mutex_);
  for (auto& [key, executor] : executors_) executor->forget_capture();
}

int64_t Session::replayed_steps() {
  std::lock_guard lock(executors_mutex_);
  int64_t replays = 0;
  for (const auto& [key, executor] : executors_) replays += executor->replays();
  return replays;
}

std::vector<std::string> Session::capture_refusals() {
  std::lock_guard lock(executors_mutex_);
  std::vector<std::string> refusals;
  for (const auto& [key, executor] : executors_) {
    if (std::string why = executor->capture_refusal(); !why.empty()) refusals.push_back(std::move(why));
  }
  return refusals;
}

std::vector<NodeTiming> Session::last_timeline() const {
  std::lock_guard lock(timeline_mutex_);
  return last_timeline_;
}

graph::Expected<Executor*> Session::executor_for(const std::vector<graph::NodeId>& fed,
                                                 std::span<const graph::ValueRef> fetches,
                                                 std::span<const graph::NodeId> targets) {
  const std::string key = request_key(fed, fetches, targets);
  std::lock_guard lock(executors_mutex_);
  auto it = executors_.find(key);
  if (it != executors_.end()) return it->second.get();
  PlanRequest request{fed, {fetches.begin(), fetches.end()}, {targets.begin(), targets.end()}};
  MIRRA_ASSIGN_OR_RETURN(ExecutionPlan plan,
                         build_plan(graph_, request, kernels_, devices_, options_.default_device));
  auto executor = std::make_unique<Executor>(std::move(plan), resources_, options_.deterministic, options_.capture_steps);
  Executor* raw = executor.get();
  executors_.emplace(key, std::move(executor));
  return raw;
}

graph::Expected<StagedFeeds> Session::stage(const Feeds& feeds) const {
  MIRRA_RETURN_IF_ERROR(prepared_);
  StagedFeeds staged;
  staged.session_ = this;
  for (const auto& [name, value] : feeds) {
    const auto id = graph_.find(name);
    if (!id) return graph::invalid_argument("feed '" + name + "': the graph has no node with that name");
    const graph::Node& node = graph_.node(*id);
    if (node.outputs.size() != 1) {
      return graph::invalid_argument("feed '" + name + "': only single-output nodes can be fed");
    }
    const graph::TensorType& expected = node.outputs[0];
    if (!value.defined()) return graph::invalid_argument("feed '" + name + "': the tensor is empty");
    if (value.dtype() != expected.dtype || !expected.shape.accepts(value.shape().dims())) {
      return graph::invalid_argument("feed '" + name + "': expected " + expected.to_string() + ", got " +
                                     value.type_string());
    }
    staged.nodes_.push_back(*id);
    // A value fed to a node whose output lives in device memory goes there first.
    const MemorySpace space = value_memory_space(node, 0, kernels_, devices_);
    if (space.host) {
      staged.values_.push_back(value);
      continue;
    }
    const Device& device = *devices_.owner_of(space);
    try {
      Device::Staged on_device = device.stage_from_host(value);
      staged.values_.push_back(std::move(on_device.tensor));
      // Every device of that memory reads the value in place (logical devices of one GPU), each on
      // its own stream: each waits for the copy (a stream on it waits for its compute stream).
      if (on_device.ready) {
        for (const auto& reader : devices_.devices()) {
          if (reader->memory_space() == space) staged.waits_.emplace_back(&reader->compute_stream(), on_device.ready);
        }
      }
    } catch (const DeviceError& e) {
      return e.status().with_context("feed '" + name + "'");
    }
  }
  return staged;
}

std::vector<int64_t> Session::next_instances(const std::vector<std::string>& groups) {
  std::vector<int64_t> instances;
  instances.reserve(groups.size());
  const std::lock_guard lock(sequences_mutex_);
  for (const std::string& group : groups) instances.push_back(group_sequences_[group]++);
  return instances;
}

graph::Expected<std::vector<Tensor>> Session::run(const Feeds& feeds, std::span<const graph::ValueRef> fetches,
                                                  std::span<const graph::NodeId> targets) {
  MIRRA_ASSIGN_OR_RETURN(StagedFeeds staged, stage(feeds));
  return run_staged(std::move(staged), fetches, targets);
}

graph::Expected<std::vector<Tensor>> Session::run_staged(StagedFeeds feeds, std::span<const graph::ValueRef> fetches,
                                                         std::span<const graph::NodeId> targets) {
  MIRRA_RETURN_IF_ERROR(prepared_);
  if (feeds.session_ != this) return graph::invalid_argument("the feeds were not staged by this session");
  for (auto& [stream, ready] : feeds.waits_) stream->wait(std::move(ready));
  const std::vector<graph::NodeId>& fed = feeds.nodes_;
  std::vector<Tensor> fed_values = std::move(feeds.values_);
  MIRRA_ASSIGN_OR_RETURN(Executor * executor, executor_for(fed, fetches, targets));
  graph::Expected<std::vector<Tensor>> result = graph::internal_error("step did not run");
  std::optional<StepTimeline> timeline;
  if (trace_.load()) timeline.emplace();
  std::vector<int64_t> instances = next_instances(executor->collective_groups());
  arena_->execute(
      [&] { result = executor->run(std::move(fed_values), std::move(instances), timeline ? &*timeline : nullptr); });
  if (timeline) {
    std::lock_guard lock(timeline_mutex_);
    last_timeline_ = std::move(*timeline).timings();
  }
  if (result.ok()) {
    try {
      for (Tensor& fetched : *result) fetched = to_host(fetched);
    } catch (const DeviceError& e) {
      return e.status().with_context("fetching the step's results");
    }
  }
  return result;
}

}  // namespace mirra::runtime
