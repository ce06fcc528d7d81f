// prune: the nodes the program's references need (a collective's rank with its whole group), then
// Graph::keep_only and every reference moved.
#include "strategies/pruning.h"

#include <algorithm>
#include <map>
#include <string>

namespace mirra::strategies {

namespace {

// What `roots` need, and with a collective's rank every rank of its group (the others would wait for
// it), and what those need in turn.
std::vector<bool> with_whole_groups(const graph::Graph& g, const graph::OpRegistry& ops, std::vector<graph::NodeId> roots) {
  std::map<std::string, std::vector<graph::NodeId>> ranks;  // by group
  for (const graph::Node& node : g.nodes()) {
    const graph::OpSchema* schema = ops.find(node.op);
    const std::string* group = node.attrs.get<std::string>("group");
    if (schema != nullptr && schema->has(graph::kCollective) && group != nullptr) ranks[*group].push_back(node.id);
  }
  for (;;) {
    const std::vector<bool> needed = g.needed_for(roots);
    const size_t before = roots.size();
    for (const auto& [group, members] : ranks) {
      const bool live = std::any_of(members.begin(), members.end(), [&](graph::NodeId id) { return needed[id]; });
      for (graph::NodeId id : members) {
        if (live && !needed[id]) roots.push_back(id);
      }
    }
    if (roots.size() == before) return needed;
  }
}

}  // namespace

void prune(TrainingProgram& program, std::span<const graph::NodeId> replaced) {
  graph::Graph& g = program.graph;
  runtime::training::TrainingGraph& s = program.signature;
  std::vector<graph::NodeId> roots = {s.train,          s.accumulate,   s.synchronize,        s.loss.node,
                                      s.loss_weight.node, s.correct.node, s.learning_rate.node, program.loss_gradient.node};
  roots.insert(roots.end(), program.step_state.begin(), program.step_state.end());
  for (graph::ValueRef value : program.reported) roots.push_back(value.node);
  for (const runtime::training::TrainingMetric& metric : s.metrics) roots.insert(roots.end(), {metric.value.node, metric.weight.node});
  for (const auto& [variable, gradient] : program.variables_and_gradients) roots.insert(roots.end(), {variable.node, gradient.node});
  for (const std::string& batch : {s.features, s.labels}) {
    if (const auto id = g.find(batch)) roots.push_back(*id);
  }
  for (const runtime::training::BatchInput& batch : s.batch_inputs) {
    if (const auto id = g.find(batch.name)) roots.push_back(*id);
  }
  for (const graph::Node& node : g.nodes()) {
    if (node.op == "Variable" && std::find(replaced.begin(), replaced.end(), node.id) == replaced.end()) roots.push_back(node.id);
  }
  std::erase_if(roots, [&](graph::NodeId id) { return id >= g.size(); });
  const std::vector<graph::NodeId> moved = g.keep_only(with_whole_groups(g, *program.ops, roots));
  s.train = graph::remap(s.train, moved);
  s.accumulate = graph::remap(s.accumulate, moved);
  s.synchronize = graph::remap(s.synchronize, moved);
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
  for (graph::ValueRef& value : program.reported) value = graph::remap(value, moved);
  for (auto& [variable, gradient] : program.variables_and_gradients) {
    variable = graph::remap(variable, moved);
    gradient = graph::remap(gradient, moved);
  }
}

}  // namespace mirra::strategies
