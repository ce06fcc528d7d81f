// Executor, recorded steps (Note [Captured steps] in executor.h): whether a plan's steps can be
// recorded, the recording of one step, and its replays.
#include <cstdio>
#include <cstring>
#include <future>

#include "runtime/executor.h"
#include "runtime/executor_state.h"
#include "runtime/placement.h"

namespace mirra::runtime {

namespace {

using executor_detail::allocation_stream_of;
using executor_detail::call_kernel;
using executor_detail::invoke_kernel;
using executor_detail::launch;
using executor_detail::stream_of;

// Runs the kernel, and waits for an asynchronous one's done callback: in a replay, the stream's next
// work runs after the kernel's.
Status run_to_completion(const KernelDef& kernel, KernelContext& context) {
  if (kernel.async_fn == nullptr) return call_kernel(kernel.fn, context);
  std::promise<Status> finished;
  std::future<Status> result = finished.get_future();
  invoke_kernel(kernel, context, [&finished](Status status) { finished.set_value(std::move(status)); });
  return result.get();
}

// The step's last device (in plan order) whose memory is `space`: where a feed held there is copied in.
const Device* device_holding(const ExecutionPlan& plan, const MemorySpace& space) {
  for (auto pn = plan.nodes.rbegin(); pn != plan.nodes.rend(); ++pn) {
    if (!pn->fed && pn->device->memory_space() == space) return pn->device;
  }
  return nullptr;
}

bool same_type(const Tensor& a, const Tensor& b) {
  return a.defined() && b.defined() && a.dtype() == b.dtype() && a.shape() == b.shape();
}

}  // namespace

std::string Executor::capture_refusal() const {
  std::lock_guard lock(capture_mutex_);
  return capture_refusal_;
}

int64_t Executor::replays() const {
  std::lock_guard lock(capture_mutex_);
  return replays_;
}

void Executor::forget_capture() {
  std::lock_guard lock(capture_mutex_);
  captured_.reset();
  uncaptured_steps_ = 0;
}

// Host nodes may run before the devices' work (depending on none of it) or after it (feeding none of
// it); a kernel on a device must not read an input on the host when launched, nor complete there.
Executor::CapturePlan Executor::plan_capture() const {
  using Role = CapturePlan::Role;
  const size_t n = plan_.nodes.size();
  CapturePlan capture;
  capture.roles.assign(n, Role::device);
  capture.follows.resize(n);
  for (uint32_t i = 0; i < n; ++i) {
    for (uint32_t consumer : plan_.consumers_of(plan_.nodes[i])) capture.follows[consumer].push_back(i);
  }
  if (deterministic_) {
    capture.refusal = "deterministic execution runs one node at a time, on the host";
    return capture;
  }
  const auto on_device = [&](uint32_t i) { return !plan_.nodes[i].fed && plan_.nodes[i].device->asynchronous(); };
  std::vector<bool> after_device_work(n, false), feeds_device_work(n, false);
  for (uint32_t i = 0; i < n; ++i) {  // the plan is in topological order
    for (uint32_t producer : capture.follows[i]) {
      if (on_device(producer) || after_device_work[producer]) after_device_work[i] = true;
    }
  }
  for (uint32_t i = static_cast<uint32_t>(n); i-- > 0;) {
    for (uint32_t consumer : plan_.consumers_of(plan_.nodes[i])) {
      if (on_device(consumer) || feeds_device_work[consumer]) feeds_device_work[i] = true;
    }
  }
  for (uint32_t i = 0; i < n; ++i) {
    const PlanNode& pn = plan_.nodes[i];
    if (pn.fed) continue;
    if (!on_device(i)) {
      if (!after_device_work[i]) {
        capture.roles[i] = Role::before;
        capture.before.push_back(i);
      } else if (!feeds_device_work[i]) {
        capture.roles[i] = Role::after;
        capture.after.push_back(i);
      } else {
        capture.refusal = describe(pn) + " runs on the host between work of the devices, where a replay would not run it";
        return capture;
      }
      continue;
    }
    if (pn.kernel->host_memory_inputs != 0 && pn.node->op != kCopyFromHostOp) {
      capture.refusal = describe(pn) + " reads an input on the host when it is launched, and its replays would keep that value";
      return capture;
    }
    if (pn.kernel->not_capturable != nullptr) {
      capture.refusal = describe(pn) + " " + pn.kernel->not_capturable;
      return capture;
    }
  }
  bool any_on_device = false;
  for (uint32_t i = 0; i < n; ++i) any_on_device = any_on_device || on_device(i);
  if (!any_on_device) capture.refusal = "every node of the step runs on the host";
  return capture;
}

// A ready node of the step being recorded, in place of running it: a host node runs now or waits
// for the replays (record_host_node), a node on a device goes into the recording (record_node); its
// consumers follow once it is recorded, and its context is kept for the replays.
void Executor::record_ready_node(StepState& step, uint32_t index, std::vector<uint32_t>& ready,
                                 oneapi::tbb::task_group& tasks) const {
  const PlanNode& pn = plan_.nodes[index];
  if (!pn.device->asynchronous()) {
    if (Status status = record_host_node(step, index); !status.ok()) return step.record(std::move(status));
    return make_ready(step, plan_.consumers_of(pn), ready, tasks);
  }
  auto* call = new AsyncNode(*this, step, pn);
  call->continuation = tasks.defer([this, &step, &tasks, index, call] {
    std::unique_ptr<AsyncNode> recorded(call);
    const PlanNode& node = plan_.nodes[index];
    Status status = recorded->status;
    step.capture->keep(std::move(recorded));
    if (!status.ok()) return step.record(status.with_context(describe(node)));
    std::vector<uint32_t> next;
    make_ready(step, plan_.consumers_of(node), next, tasks);
    process(step, std::move(next), tasks);
  });
  record_node(step, index, *call, [this, &step, call](Status status) {
    call->status = std::move(status);
    continue_in_arena(step, *call);
  });
}

// While the step records: a host node before the devices' work runs, and the values it computes are
// given buffers of the recording's own for the devices' copies to read; one after it waits.
Status Executor::record_host_node(StepState& step, uint32_t index) const {
  CapturedStep& captured = *step.capture;
  if (captured.plan.roles[index] == CapturePlan::Role::after) return Status();
  MIRRA_RETURN_IF_ERROR(run_node(step, index));
  const PlanNode& pn = plan_.nodes[index];
  for (uint32_t slot = pn.first_output; slot < pn.first_output + pn.num_outputs; ++slot) {
    Tensor& value = step.values[slot];
    if (!value.defined() || !value.memory_space().host) continue;
    CapturedStep::HostInput input{slot, host_copy(value, captured.host_input_allocator), value};
    value = input.recorded;
    captured.add_host_input(std::move(input));
  }
  return Status();
}

bool Executor::replayable_with(const std::vector<Tensor>& feeds) const {
  for (size_t i = 0; i < feeds.size(); ++i) {
    if (plan_.fed_nodes[i] == kNotInPlan) continue;
    if (!same_type(feeds[i], captured_->state->values[plan_.nodes[plan_.fed_nodes[i]].first_output])) return false;
  }
  return true;
}

// Under capture_mutex_. The step runs as usual except that each kernel goes into the recording
// (record_node) and counts as done for the step at once; then the recording is replayed once, which
// computes the step.
graph::Expected<std::vector<Tensor>> Executor::capture(std::vector<Tensor> feeds, std::vector<int64_t> instances) {
  const auto refuse = [&](std::string why) {
    capture_refusal_ = std::move(why);
    std::fprintf(stderr, "mirra: steps not captured: %s\n", capture_refusal_.c_str());
  };
  CapturePlan capture_plan = plan_capture();
  if (!capture_plan.refusal.empty()) {
    refuse(std::move(capture_plan.refusal));
    return run_uncaptured(std::move(feeds), std::move(instances), nullptr);
  }
  std::vector<Stream*> streams;
  std::vector<Allocator*> allocators;
  std::string device_names;
  const Device* first_device = nullptr;
  for (const PlanNode& pn : plan_.nodes) {
    if (pn.fed || !pn.device->asynchronous()) continue;
    if (first_device == nullptr) first_device = pn.device;
    for (Stream* stream : {&pn.device->compute_stream(), &pn.device->communication_stream()}) {
      if (std::find(streams.begin(), streams.end(), stream) == streams.end()) streams.push_back(stream);
    }
    for (Allocator* allocator : {pn.device->allocator().get(), pn.device->host_memory_allocator().get()}) {
      if (std::find(allocators.begin(), allocators.end(), allocator) != allocators.end()) continue;
      allocators.push_back(allocator);
    }
    const std::string name = pn.device->id().to_string();
    if (device_names.find(name) == std::string::npos) device_names += (device_names.empty() ? "" : ", ") + name;
  }
  std::unique_ptr<StepCapture> recording = streams.front()->capture(streams);
  if (recording == nullptr) {
    refuse("the streams of " + device_names + " cannot be recorded together");
    return run_uncaptured(std::move(feeds), std::move(instances), nullptr);
  }

  auto captured = std::make_unique<CapturedStep>();
  captured->plan = std::move(capture_plan);
  captured->recording = std::move(recording);
  captured->state = acquire_state();
  StepState& step = *captured->state;
  step.instances = instances;
  step.communicators = &resources_.communicators;
  step.capture = captured.get();
  if (!step.arena) step.arena.emplace(oneapi::tbb::task_arena::attach{});
  // The captured feeds are buffers of the recording's own (in host memory, a GPU's pinned memory, which
  // its copies may read while recorded): later feeds are copied into them.
  captured->host_input_allocator = first_device->host_memory_allocator();
  captured->feed_devices.assign(feeds.size(), nullptr);
  for (size_t i = 0; i < feeds.size(); ++i) {
    if (plan_.fed_nodes[i] == kNotInPlan) continue;
    const Tensor& fed = feeds[i];
    Tensor& held = step.values[plan_.nodes[plan_.fed_nodes[i]].first_output];
    if (fed.memory_space().host) {
      held = host_copy(fed, captured->host_input_allocator);
    } else {
      held = fed;
      captured->feed_devices[i] = device_holding(plan_, fed.memory_space());
    }
  }
  for (Stream* stream : streams) stream->synchronize();  // nothing from before is pending while it records
  for (Allocator* allocator : allocators) {
    if (auto hold = allocator->hold_freed_blocks()) captured->holds.push_back(std::move(hold));
  }
  Status status = captured->recording->begin();
  if (status.ok()) run_parallel(step);
  const Status ended = captured->recording->end();
  for (const auto& hold : captured->holds) hold->stop_collecting();
  step.capture = nullptr;
  // Host nodes after the devices' work read what those before computed, not the recorded copies.
  for (CapturedStep::HostInput& input : captured->host_inputs) {
    step.values[input.slot] = std::exchange(input.computed, Tensor());
  }
  if (status.ok() && step.failed.load(std::memory_order_acquire)) status = step.error;
  if (status.ok()) status = captured->take_error();
  if (status.ok()) status = ended;
  if (!status.ok()) {
    refuse("recording the step on " + device_names + " failed: " + status.message());
    // The recording's collectives may have been abandoned under this step's instances: the step runs
    // under others, which no other step uses (the session's numbers stay below 2^62).
    for (int64_t& instance : instances) instance |= int64_t{1} << 62;
    return run_uncaptured(std::move(feeds), std::move(instances), nullptr);
  }
  captured_ = std::move(captured);
  return replay(std::move(feeds), /*prologue_ran=*/true);
}

// Under capture_mutex_.
graph::Expected<std::vector<Tensor>> Executor::replay(std::vector<Tensor> feeds, bool prologue_ran) {
  CapturedStep& captured = *captured_;
  StepState& step = *captured.state;
  for (size_t i = 0; i < feeds.size(); ++i) {
    if (plan_.fed_nodes[i] == kNotInPlan) continue;
    const PlanNode& fed_node = plan_.nodes[plan_.fed_nodes[i]];
    Tensor& held = step.values[fed_node.first_output];
    const Tensor& fed = feeds[i];
    if (fed.same_bytes(held)) continue;
    if (held.memory_space().host) {
      if (fed.byte_size() > 0) std::memcpy(held.mutable_raw_data(), fed.raw_data(), fed.byte_size());
      continue;
    }
    const Device* device = captured.feed_devices[i];
    MIRRA_CHECK(device != nullptr, "a captured feed in the memory of no device of the step");
    MIRRA_RETURN_IF_ERROR(device->enqueue_copy(fed, held).with_context("copying feed " + std::to_string(i) + " in"));
  }
  if (!prologue_ran) {
    for (uint32_t index : captured.plan.before) MIRRA_RETURN_IF_ERROR(run_node(step, index));
  }
  for (CapturedStep::HostInput& input : captured.host_inputs) {
    const Tensor& value = step.values[input.slot];
    if (value.raw_data() == input.recorded.raw_data()) continue;
    if (!same_type(value, input.recorded)) {
      return graph::internal_error(describe(plan_.nodes[plan_.value_owner[input.slot]]) + " computed " + value.type_string() +
                                   " where the recorded step has " + input.recorded.type_string());
    }
    if (value.byte_size() > 0) std::memcpy(input.recorded.mutable_raw_data(), value.raw_data(), value.byte_size());
  }
  const Status replayed = captured.recording->replay();
  const Status failed = captured.take_error();
  if (!failed.ok()) return failed;
  MIRRA_RETURN_IF_ERROR(replayed);
  for (uint32_t index : captured.plan.after) MIRRA_RETURN_IF_ERROR(run_node(step, index));
  ++replays_;
  // The next replay writes these buffers again.
  std::vector<Tensor> fetched;
  fetched.reserve(plan_.fetch_slots.size());
  for (uint32_t slot : plan_.fetch_slots) {
    const Tensor& value = step.values[slot];
    fetched.push_back(value.memory_space().host ? host_copy(value, host_allocator()) : value);
  }
  return fetched;
}

// The node's kernel, recorded on its stream after the events of the nodes it follows on other streams, and
// an event after it for its consumers on other streams; the node is done for the step at once. An
// asynchronous kernel on a device whose replays run only device work (a GPU's collective) launches
// as in any step: its host part meets its peers now, its device work goes into the recording.
void Executor::record_node(StepState& step, uint32_t index, AsyncNode& call, KernelDone done) const {
  const PlanNode& pn = plan_.nodes[index];
  CapturedStep& captured = *step.capture;
  if (!pn.on_stream && !captured.recording->replays_host_code()) {
    return record_device_collective(step, index, call, std::move(done));
  }
  Stream& stream = stream_of(pn);
  if (pn.on_communication_stream) stream.wait(pn.device->compute_stream().record());
  for (uint32_t producer : captured.plan.follows[index]) {
    const std::shared_ptr<Event>& event = step.events[producer];
    if (event != nullptr && &stream_of(plan_.nodes[producer]) != &stream) stream.wait(event);
  }
  stream.enqueue([this, &pn, &call, &captured, executions = step.executions()] {
    const MemorySpace space = pn.device->memory_space();
    ScopedMemoryAccess access(space, pn.kernel->uses_host_memory());
    ScopedAllocationStream allocating_for(allocation_stream_of(pn));
    const Status status = run_to_completion(*pn.kernel, call.context);
    if (status.ok()) return;
    const Status failure = status.with_context(describe(pn));
    captured.fail(failure);
    resources_.communicators.abandon(executions, failure);  // peers waiting for this kernel's part
  });
  step.events[index] = stream.record();
  done(Status());
}

// In a step as it runs, such a kernel is launched once the devices have run what it reads, and its
// consumers once they have run it, so no stream waits for it; in a recording nothing has run. So its
// device's communication stream (where a GPU's collectives run) first waits for the compute stream,
// after the events of what it follows elsewhere, and once it has launched, the compute stream and
// its consumers elsewhere wait for the communication stream.
void Executor::record_device_collective(StepState& step, uint32_t index, AsyncNode& call, KernelDone done) const {
  const PlanNode& pn = plan_.nodes[index];
  Stream& compute = pn.device->compute_stream();
  for (uint32_t producer : step.capture->plan.follows[index]) {
    const std::shared_ptr<Event>& event = step.events[producer];
    if (event != nullptr && &stream_of(plan_.nodes[producer]) != &compute) compute.wait(event);
  }
  pn.device->communication_stream().wait(compute.record());
  launch(pn, call.context, [&step, &pn, index, done = std::move(done)](Status status) {
    if (status.ok()) {
      std::shared_ptr<Event> launched = pn.device->communication_stream().record();
      pn.device->compute_stream().wait(launched);
      step.events[index] = std::move(launched);
    }
    done(std::move(status));
  });
}

}  // namespace mirra::runtime
