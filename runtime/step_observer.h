// StepObserver: watches the nodes of a step run without taking part in it (Taskflow's
// ObserverInterface), so that tracing, profiling or counting stay out of the executor's step loop.
// The executor calls it only for the steps it is given to (Executor::run), and a step with an
// observer is never a recorded or replayed one (Note [Captured steps]).
#pragma once

#include <cstddef>
#include <cstdint>

#include "graph/graph.h"

namespace mirra::runtime {

class StepObserver {
 public:
  virtual ~StepObserver() = default;

  // Before any node of the step runs; every `index` below is less than `plan_nodes`.
  virtual void on_step_start(size_t plan_nodes) = 0;
  // Node `index` of the plan (graph node `node`): right before its kernel is called, and once the
  // kernel finished: a synchronous kernel returned, an asynchronous one called its done callback, a
  // kernel on a device's stream returned there (the device may still run what it launched). Both
  // come on threads of the step's choosing, those of different nodes at the same time; the end of a
  // node comes after its start, and before the step ends.
  virtual void on_node_start(uint32_t index, const graph::Node& node) = 0;
  virtual void on_node_end(uint32_t index, const graph::Node& node) = 0;
};

}  // namespace mirra::runtime
