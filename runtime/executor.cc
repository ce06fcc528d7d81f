// Executor: steps as they run: dispatch (inline vs task), asynchronous kernels, release of dead values,
// first-error-wins; the step state is in executor_state.h, recorded steps in executor_capture.cc.
#include "runtime/executor.h"

#include <algorithm>
#include <condition_variable>
#include <future>
#include <thread>

#include "runtime/executor_state.h"

namespace mirra::runtime {

namespace {

using executor_detail::allocation_stream_of;
using executor_detail::call_kernel;
using executor_detail::invoke_kernel;
using executor_detail::launch;
using executor_detail::stream_of;

}  // namespace

Executor::Executor(ExecutionPlan plan, const SessionResources& resources, bool deterministic, bool capture)
    : plan_(std::move(plan)), resources_(resources), deterministic_(deterministic), capture_(capture) {}

// Note [Continuations from other threads]
// The done callback of an asynchronous kernel runs on the thread that finished it and enqueues the
// node's continuation in the step's arena. The continuation may run, and the step end, while that
// thread is still inside the arena's enqueue (after it queued the task, it wakes the arena's
// workers); so may the session, and with it the arena, which the thread would then touch after it
// was freed. The executor (which the session ends before its arena) counts those callbacks and ends
// only after the last has left.
Executor::~Executor() {
  while (continuing_.load(std::memory_order_acquire) != 0) std::this_thread::yield();
}

void Executor::continue_in_arena(StepState& step, AsyncNode& call) const {
  continuing_.fetch_add(1, std::memory_order_acq_rel);  // before the continuation runs, so before the step can end
  step.arena->enqueue(std::move(call.continuation));
  continuing_.fetch_sub(1, std::memory_order_acq_rel);
}

std::unique_ptr<Executor::StepState> Executor::acquire_state() {
  std::unique_ptr<StepState> state;
  {
    std::lock_guard lock(states_mutex_);
    if (!free_states_.empty()) {
      state = std::move(free_states_.back());
      free_states_.pop_back();
    }
  }
  if (!state) state = std::make_unique<StepState>(plan_);
  for (size_t i = 0; i < plan_.nodes.size(); ++i) {
    state->pending[i].store(plan_.nodes[i].initial_pending, std::memory_order_relaxed);
    state->uses[i].store(plan_.nodes[i].initial_uses, std::memory_order_relaxed);
  }
  state->failed.store(false, std::memory_order_relaxed);
  state->error = Status();
  return state;
}

void Executor::release_state(std::unique_ptr<StepState> state) {
  // After a full parallel step only fetched values are left (the rest were released as their last
  // consumer ran); after an error or a sequential step anything may be.
  if (state->failed.load(std::memory_order_relaxed) || deterministic_) {
    for (Tensor& value : state->values) value = Tensor();
  } else {
    for (uint32_t slot : plan_.fetch_slots) state->values[slot] = Tensor();
  }
  std::lock_guard lock(states_mutex_);
  free_states_.push_back(std::move(state));
}

// Reusable: every other reader of the producer has finished (its use count is down to this node),
// the buffer has no other owner (a feed, a variable, a view), and the node reads it once.
std::vector<bool> Executor::reusable_inputs(const StepState& step, const PlanNode& pn) const {
  std::vector<bool> reusable;
  const std::span<const uint32_t> slots = plan_.inputs_of(pn);
  for (size_t i = 0; i < slots.size(); ++i) {
    const uint32_t owner = plan_.value_owner[slots[i]];
    const PlanNode& producer = plan_.nodes[owner];
    const int32_t uses = producer.initial_uses == 1 ? 1 : step.uses[owner].load(std::memory_order_acquire);
    const Tensor& value = step.values[slots[i]];
    reusable.push_back(uses == 1 && !producer.fed && value.defined() && value.buffer().use_count() == 1 &&
                       std::count(slots.begin(), slots.end(), slots[i]) == 1);
  }
  return reusable;
}

// The context of one run of the node's kernel (`reusable` as reusable_inputs found it, when the
// kernel asks).
KernelContext Executor::context_for(StepState& step, const PlanNode& pn, const std::vector<bool>& reusable) const {
  const auto index = static_cast<size_t>(&pn - plan_.nodes.data());
  const int64_t instance = pn.collective ? step.instances[static_cast<size_t>(plan_.collective_group_of[index])] : 0;
  return KernelContext(*pn.node, *pn.device, resources_, instance, step.values.data(), plan_.inputs_of(pn),
                       step.values.data() + pn.first_output, pn.reuses_inputs ? &reusable : nullptr,
                       pn.host_memory_outputs, plan_.kernel_states[index].get());
}

Status Executor::run_node(StepState& step, uint32_t index) const {
  const PlanNode& pn = plan_.nodes[index];
  if (pn.completes_later) return run_async_node_to_completion(step, index);
  Tensor* outputs = step.values.data() + pn.first_output;
  const std::vector<bool> reusable = pn.reuses_inputs ? reusable_inputs(step, pn) : std::vector<bool>();
  KernelContext context = context_for(step, pn, reusable);
  if (step.observer != nullptr) step.observer->on_node_start(index, *pn.node);
  const Status status = call_kernel(pn.fn, context);
  if (step.observer != nullptr) step.observer->on_node_end(index, *pn.node);
  if (!status.ok()) return status.with_context(describe(pn));
  return check_outputs(pn, outputs);
}

// A kernel that completes later: an asynchronous kernel, or any kernel on a device with a stream of
// its own. The step goes on with other nodes; the done callback submits the continuation, which
// makes the node's consumers ready. A node on a stream hands its consumers on streams over at once
// (`ready`): they run after it on its stream, or wait for its event on theirs.
void Executor::start_async_node(StepState& step, uint32_t index, std::vector<uint32_t>& ready,
                                oneapi::tbb::task_group& tasks) const {
  const PlanNode& pn = plan_.nodes[index];
  auto* call = new AsyncNode(*this, step, pn);
  call->continuation = tasks.defer([this, &step, &tasks, index, call] {
    std::unique_ptr<AsyncNode> finished(call);
    const PlanNode& node = plan_.nodes[index];
    Status status = std::move(finished->status);
    finished.reset();
    if (!node.on_stream) {  // one on a stream was checked there
      status = status.ok() ? check_outputs(node, step.values.data() + node.first_output) : status.with_context(describe(node));
    }
    if (!status.ok()) {
      step.record(status);
      return;
    }
    release_inputs(step, node);
    // A node on a stream handed its early consumers over when it was enqueued.
    std::vector<uint32_t> next;
    make_ready(step, node.on_stream ? plan_.late_consumers_of(index) : plan_.consumers_of(node), next, tasks);
    process(step, std::move(next), tasks);
  });
  if (pn.on_stream) {
    enqueue_on_stream(step, index, *call, [this, &step, call](Status status) {
      call->status = std::move(status);
      continue_in_arena(step, *call);
    });
    make_ready(step, plan_.early_consumers_of(index), ready, tasks);
    return;
  }
  if (step.observer != nullptr) step.observer->on_node_start(index, *pn.node);
  launch(pn, call->context, [this, &step, call, observer = step.observer, &pn, index](Status status) {
    if (observer != nullptr) observer->on_node_end(index, *pn.node);
    call->status = std::move(status);
    continue_in_arena(step, *call);
  });
}

// The node's kernel as work on its stream, after the events of its producers on other streams (on
// the communication stream, after what the compute stream has queued: KernelDef::
// on_communication_stream). There it is skipped when the step already failed; otherwise it runs
// with access to the device's memory, its outputs are checked, and a failure is recorded at once, so
// the work queued behind it skips too (it may have been enqueued before this ran).
void Executor::enqueue_on_stream(StepState& step, uint32_t index, AsyncNode& call, KernelDone done) const {
  const PlanNode& pn = plan_.nodes[index];
  Stream& stream = stream_of(pn);
  if (pn.on_communication_stream) stream.wait(pn.device->compute_stream().record());
  for (uint32_t producer : plan_.stream_waits_of(index)) stream.wait(step.events[producer]);
  stream.enqueue([this, &step, &pn, &call, index, done = std::move(done)] {
    if (step.failed.load(std::memory_order_acquire)) return done(graph::aborted(describe(pn) + ": not run, the step failed"));
    const MemorySpace space = pn.device->memory_space();
    ScopedMemoryAccess access(space, pn.kernel->uses_host_memory());
    ScopedAllocationStream allocating_for(allocation_stream_of(pn));
    if (step.observer != nullptr) step.observer->on_node_start(index, *pn.node);
    Status status = call_kernel(pn.fn, call.context);
    if (step.observer != nullptr) step.observer->on_node_end(index, *pn.node);
    status = status.ok() ? check_outputs(pn, step.values.data() + pn.first_output) : status.with_context(describe(pn));
    if (!status.ok()) {
      step.record(status);
      return done(std::move(status));
    }
    // Host consumers and the release of inputs wait until the device ran the kernel's work.
    stream_of(pn).when_device_done([&step, &pn, done](Status on_device) {
      if (!on_device.ok()) {
        on_device = on_device.with_context(describe(pn));
        step.record(on_device);
      }
      done(std::move(on_device));
    });
  });
  if (pn.records_event) step.events[index] = stream.record();
}

// Deterministic mode: the one thread waits for the kernel's done callback.
Status Executor::run_async_node_to_completion(StepState& step, uint32_t index) const {
  const PlanNode& pn = plan_.nodes[index];
  const std::vector<bool> reusable = pn.reuses_inputs ? reusable_inputs(step, pn) : std::vector<bool>();
  KernelContext context = context_for(step, pn, reusable);
  std::promise<Status> finished;
  std::future<Status> result = finished.get_future();
  if (step.observer != nullptr) step.observer->on_node_start(index, *pn.node);
  launch(pn, context, [&finished](Status status) { finished.set_value(std::move(status)); });
  const Status status = result.get();
  if (step.observer != nullptr) step.observer->on_node_end(index, *pn.node);
  if (!status.ok()) return status.with_context(describe(pn));
  return check_outputs(pn, step.values.data() + pn.first_output);
}

Status Executor::check_outputs(const PlanNode& pn, const Tensor* outputs) const {
  for (uint32_t i = 0; i < pn.num_outputs; ++i) {
    if (!output_matches(plan_.outputs[pn.first_output + i], outputs[i])) {
      return graph::internal_error(describe(pn) + ": output " + std::to_string(i) + " is " +
                                   (outputs[i].defined() ? outputs[i].type_string() : std::string("unset")) +
                                   ", but the graph declares " + pn.node->outputs[i].to_string());
    }
  }
  return Status();
}

bool Executor::output_matches(const OutputSpec& spec, const Tensor& produced) const {
  if (!produced.defined() || produced.dtype() != spec.dtype || produced.rank() != spec.rank) return false;
  const int64_t* declared = plan_.output_dims.data() + spec.dims_begin;
  for (int d = 0; d < spec.rank; ++d) {
    if (declared[d] >= 0 && declared[d] != produced.dim(d)) return false;
  }
  return true;
}

std::string Executor::describe(const PlanNode& pn) {
  return "node '" + pn.node->name + "' (" + pn.node->op + ") on " + pn.device->id().to_string();
}

// Releases the values whose last reader this node was. A count that starts at 1 has one
// decrementer, which needs no atomic read-modify-write.
void Executor::release_inputs(StepState& step, const PlanNode& pn) const {
  auto release_outputs = [&](const PlanNode& p) {
    for (uint32_t i = 0; i < p.num_outputs; ++i) step.values[p.first_output + i] = Tensor();
  };
  for (uint32_t producer : plan_.producers_of(pn)) {
    const PlanNode& p = plan_.nodes[producer];
    if (p.initial_uses == 1 || step.uses[producer].fetch_sub(1, std::memory_order_acq_rel) == 1) release_outputs(p);
  }
  if (pn.initial_uses == 0) release_outputs(pn);
}

// Counts one finished producer for each of `consumers`; those with none left to wait for go to
// `ready_cheap`, or become tasks when expensive (except one that this thread may run itself when it
// has nothing else to do). Enqueueing on a stream is cheap whatever the kernel.
void Executor::make_ready(StepState& step, std::span<const uint32_t> consumers, std::vector<uint32_t>& ready_cheap,
                          oneapi::tbb::task_group& tasks) const {
  uint32_t held_expensive = kNotInPlan;
  for (uint32_t consumer : consumers) {
    const PlanNode& c = plan_.nodes[consumer];
    if (c.initial_pending != 1 && step.pending[consumer].fetch_sub(1, std::memory_order_acq_rel) != 1) continue;
    if (!c.expensive || c.on_stream) {
      ready_cheap.push_back(consumer);
      continue;
    }
    if (held_expensive != kNotInPlan) {
      tasks.run([this, &step, &tasks, held_expensive] { process(step, {held_expensive}, tasks); });
    }
    held_expensive = consumer;
  }
  if (held_expensive != kNotInPlan) {
    if (ready_cheap.empty()) {
      ready_cheap.push_back(held_expensive);
    } else {
      tasks.run([this, &step, &tasks, held_expensive] { process(step, {held_expensive}, tasks); });
    }
  }
}

// Note [The order nodes go onto streams]
// Ready host nodes run depth first (the last made ready next), while their inputs are warm. A node
// on a stream only goes into its stream's queue here, and a stream runs its queue in order, so
// depth first would have a device run a whole chain of the backward pass (the input gradients down
// to the first layer) before the weight and bias gradients that became ready beside it, and a
// bucket's all-reduce, which waits for those, would wait for the whole pass. Nodes for streams are
// therefore enqueued in the order they became ready (breadth first): a device finishes a layer's
// gradients before it goes deeper.
void Executor::process(StepState& step, std::vector<uint32_t> ready, oneapi::tbb::task_group& tasks) const {
  std::vector<uint32_t> for_streams;  // in the order they became ready, the first `taken` gone
  size_t taken = 0;
  size_t scanned = 0;  // ready[0, scanned) holds no node for a stream
  for (;;) {
    if (plan_.has_stream_nodes) {
      if (taken == for_streams.size()) {
        for_streams.clear();
        taken = 0;
      }
      const size_t first_new = scanned;
      for (size_t i = first_new; i < ready.size(); ++i) {
        if (plan_.nodes[ready[i]].on_stream) {
          for_streams.push_back(ready[i]);
        } else {
          ready[scanned++] = ready[i];
        }
      }
      ready.resize(scanned);
    }
    uint32_t index;
    if (taken < for_streams.size()) {
      index = for_streams[taken++];
    } else if (!ready.empty()) {
      index = ready.back();
      ready.pop_back();
      scanned = ready.size();
    } else {
      break;
    }
    if (step.failed.load(std::memory_order_acquire)) return;
    const PlanNode& pn = plan_.nodes[index];
    if (step.capture != nullptr) {
      record_ready_node(step, index, ready, tasks);
      continue;
    }
    if (pn.completes_later) {
      start_async_node(step, index, ready, tasks);
      continue;
    }
    Status status = run_node(step, index);
    if (!status.ok()) {
      step.record(std::move(status));
      return;
    }
    release_inputs(step, pn);
    make_ready(step, plan_.consumers_of(pn), ready, tasks);
  }
}

void Executor::run_parallel(StepState& step) const {
  oneapi::tbb::task_group tasks;
  std::vector<uint32_t> cheap;
  for (uint32_t index : plan_.initially_ready) {
    if (plan_.nodes[index].expensive && !plan_.nodes[index].on_stream) {
      tasks.run([this, &step, &tasks, index] { process(step, {index}, tasks); });
    } else {
      cheap.push_back(index);
    }
  }
  process(step, std::move(cheap), tasks);
  tasks.wait();
}

// Note [Deterministic steps with peers]
// Nodes run one at a time on this thread, each to completion, the first ready one in plan order
// next, except asynchronous kernels: a collective may wait for peers later in the plan
// (every rank of a collective is a node of its own), so those are started and left in flight while
// the nodes after them run. Each kernel reads only its inputs, and a collective's sums do not depend
// on when its peers arrive, so the bits stay those of any other deterministic run.
void Executor::run_sequential(StepState& step) const {
  std::mutex mutex;
  std::condition_variable finished;
  int in_flight = 0;
  std::vector<bool> started(plan_.nodes.size(), false);
  // Under `mutex`: the node's consumers are one producer closer to running.
  const auto complete = [&](uint32_t index) {
    for (uint32_t consumer : plan_.consumers_of(plan_.nodes[index])) step.pending[consumer].fetch_sub(1);
    finished.notify_all();
  };
  uint32_t first_unstarted = 0;
  for (;;) {
    uint32_t index = kNotInPlan;
    {
      std::unique_lock lock(mutex);
      for (;;) {
        while (first_unstarted < plan_.nodes.size() && (started[first_unstarted] || plan_.nodes[first_unstarted].fed)) {
          ++first_unstarted;
        }
        if (step.failed.load() || first_unstarted == plan_.nodes.size()) break;
        for (uint32_t i = first_unstarted; i < plan_.nodes.size() && index == kNotInPlan; ++i) {
          if (!started[i] && !plan_.nodes[i].fed && step.pending[i].load() == 0) index = i;
        }
        if (index != kNotInPlan) break;
        MIRRA_CHECK(in_flight > 0, "no node of the plan is ready, and none is in flight");
        finished.wait(lock);  // every unstarted node waits for one in flight
      }
    }
    if (index == kNotInPlan) break;
    started[index] = true;
    const PlanNode& pn = plan_.nodes[index];
    if (pn.kernel->async_fn == nullptr) {
      Status status = run_node(step, index);
      if (!status.ok()) {
        step.record(std::move(status));  // not under `mutex`: abandoned collectives complete through it
        break;
      }
      std::lock_guard lock(mutex);
      complete(index);
      continue;
    }
    auto* call = new AsyncNode(*this, step, pn);
    if (step.observer != nullptr) step.observer->on_node_start(index, *pn.node);
    {
      std::lock_guard lock(mutex);
      ++in_flight;
    }
    launch(pn, call->context, [this, &step, &mutex, &finished, &in_flight, &complete, index, call](Status status) {
      std::unique_ptr<AsyncNode> done(call);
      const PlanNode& node = plan_.nodes[index];
      if (step.observer != nullptr) step.observer->on_node_end(index, *node.node);
      status = status.ok() ? check_outputs(node, step.values.data() + node.first_output) : status.with_context(describe(node));
      const bool ok = status.ok();
      if (!ok) step.record(std::move(status));
      std::lock_guard lock(mutex);
      if (ok) complete(index);
      --in_flight;
      finished.notify_all();
    });
  }
  std::unique_lock lock(mutex);
  finished.wait(lock, [&] { return in_flight == 0; });
}

graph::Expected<std::vector<Tensor>> Executor::run(std::vector<Tensor> feeds, std::vector<int64_t> instances,
                                                   StepObserver* observer) {
  MIRRA_CHECK(feeds.size() == plan_.fed_nodes.size());
  MIRRA_CHECK(instances.size() == plan_.collective_groups.size());
  if (capture_ && observer == nullptr) {
    std::unique_lock lock(capture_mutex_);
    if (captured_ != nullptr && replayable_with(feeds)) return replay(std::move(feeds));
    if (captured_ == nullptr && capture_refusal_.empty() && ++uncaptured_steps_ > 1) {
      return capture(std::move(feeds), std::move(instances));
    }
  }
  return run_uncaptured(std::move(feeds), std::move(instances), observer);
}

graph::Expected<std::vector<Tensor>> Executor::run_uncaptured(std::vector<Tensor> feeds, std::vector<int64_t> instances,
                                                              StepObserver* observer) {
  std::unique_ptr<StepState> step = acquire_state();
  step->instances = std::move(instances);
  step->communicators = &resources_.communicators;
  if (plan_.has_async_kernels && !step->arena) step->arena.emplace(oneapi::tbb::task_arena::attach{});
  if (observer != nullptr) observer->on_step_start(plan_.nodes.size());
  step->observer = observer;
  for (size_t i = 0; i < feeds.size(); ++i) {
    if (plan_.fed_nodes[i] == kNotInPlan) continue;
    step->values[plan_.nodes[plan_.fed_nodes[i]].first_output] = std::move(feeds[i]);
  }
  if (deterministic_) {
    run_sequential(*step);
  } else {
    run_parallel(*step);
  }
  step->observer = nullptr;
  if (step->failed.load(std::memory_order_acquire)) {
    Status error = step->error;
    release_state(std::move(step));
    return error;
  }
  std::vector<Tensor> fetched;
  fetched.reserve(plan_.fetch_slots.size());
  for (uint32_t slot : plan_.fetch_slots) fetched.push_back(step->values[slot]);
  release_state(std::move(step));
  return fetched;
}

}  // namespace mirra::runtime
