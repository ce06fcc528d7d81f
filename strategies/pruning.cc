// prune: the nodes the program's references need, then Graph::keep_only and every reference moved.
#include "strategies/pruning.h"

namespace mirra::strategies {

void prune(TrainingProgram& program) {
  graph::Graph& g = program.graph;
  runtime::training::TrainingGraph& s = program.signature;
  std::vector<graph::NodeId> roots = {s.train, s.accumulate, s.loss.node, s.loss_weight.node, s.correct.node, s.learning_rate.node,
                                      program.loss_gradient.node};
  roots.insert(roots.end(), program.step_state.begin(), program.step_state.end());
  for (const runtime::training::TrainingMetric& metric : s.metrics) roots.insert(roots.end(), {metric.value.node, metric.weight.node});
  for (const auto& [variable, gradient] : program.variables_and_gradients) roots.insert(roots.end(), {variable.node, gradient.node});
  for (const std::string& batch : {s.features, s.labels}) {
    if (const auto id = g.find(batch)) roots.push_back(*id);
  }
  for (const runtime::training::BatchInput& batch : s.batch_inputs) {
    if (const auto id = g.find(batch.name)) roots.push_back(*id);
  }
  for (const graph::Node& node : g.nodes()) {
    if (node.op == "Variable") roots.push_back(node.id);
  }
  std::erase_if(roots, [&](graph::NodeId id) { return id >= g.size(); });
  const std::vector<graph::NodeId> moved = g.keep_only(g.needed_for(roots));
  s.train = graph::remap(s.train, moved);
  s.accumulate = graph::remap(s.accumulate, moved);
  s.loss = graph::remap(s.loss, moved);
  s.loss_weight = graph::remap(s.loss_weight, moved);
  s.correct = graph::remap(s.correct, moved);
  for (runtime::training::TrainingMetric& metric : s.metrics) {
    metric.value = graph::remap(metric.value, moved);
    metric.weight = graph::remap(metric.weight, moved);
  }
  s.learning_rate = graph::remap(s.learning_rate, moved);
  program.loss_gradient = graph::remap(program.loss_gradient, moved);
  for (graph::NodeId& id : program.step_state) id = graph::remap(id, moved);
  for (auto& [variable, gradient] : program.variables_and_gradients) {
    variable = graph::remap(variable, moved);
    gradient = graph::remap(gradient, moved);
  }
}

}  // namespace mirra::strategies
