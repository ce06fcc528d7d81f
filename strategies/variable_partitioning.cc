// partition_variables: a variable's parts, its slots' parts, its gradient's rows and one update per
// part; its readers moved onto the parts' join; the whole variable, slots and update dropped.
#include "strategies/variable_partitioning.h"

#include <algorithm>
#include <set>

#include "ops/array_ops.h"
#include "ops/optimizers.h"
#include "runtime/collectives/communicator.h"
#include "strategies/pruning.h"

namespace mirra::strategies {

namespace {

using graph::NodeId;
using graph::ValueRef;

// Variable `whole`'s part of `rows` rows from row `offset`: a Variable of its attrs, cut.
ValueRef part_of(graph::Builder& b, const graph::Node whole, int64_t offset, int64_t rows, size_t index) {
  graph::Shape shape = whole.outputs[0].shape;
  shape.dims[0] = rows;
  graph::AttrMap attrs = whole.attrs;
  attrs.set("shape", shape);
  attrs.set("partition_of", whole.outputs[0].shape);
  attrs.set("partition_offset", offset);
  b.set_device(whole.device);
  return b.add_value({.op = "Variable", .attrs = std::move(attrs), .name = whole.name + "/part_" + std::to_string(index)});
}

// The update that applies `gradient` to `variable`, when it is the gradient's only reader.
graph::Expected<NodeId> only_update(const graph::Graph& g, const graph::OpRegistry& ops, ValueRef variable, ValueRef gradient) {
  std::optional<NodeId> update;
  for (const graph::Node& node : g.nodes()) {
    const graph::OpSchema* schema = ops.find(node.op);
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      if (node.inputs[i] != gradient) continue;
      const bool applies = schema != nullptr && schema->update_gradient == i && node.inputs[0] == variable;
      if (!applies || update) {
        return graph::invalid_argument("parameter_server cannot cut '" + g.node(variable.node).name + "' into parts: its gradient is read by '" +
                                       node.name + "' besides its update (clipping by the global norm, loss scaling and "
                                       "check_numerics need the whole gradient); raise min_shard_bytes to keep it whole");
      }
      update = node.id;
    }
  }
  if (!update) return graph::invalid_argument("parameter_server cannot cut '" + g.node(variable.node).name + "': it has no update");
  return *update;
}

}  // namespace

std::vector<int64_t> partition_rows(int64_t rows, int64_t bytes, const PartitionPlan& plan) {
  int64_t parts = 1;
  if (plan.min_shard_bytes > 0 && plan.max_shards > 1) {
    parts = std::clamp<int64_t>(bytes / plan.min_shard_bytes, 1, plan.max_shards);
  }
  parts = std::max<int64_t>(1, std::min(parts, rows));
  std::vector<int64_t> result;
  for (int64_t p = 0; p < parts; ++p) result.push_back(runtime::participant_share(rows, parts, p));
  return result;
}

graph::Expected<std::vector<std::string>> partition_variables(TrainingProgram& program, const PartitionPlan& plan) {
  graph::Graph& g = program.graph;
  const graph::OpRegistry& ops = *program.ops;
  graph::Builder b(g, ops);
  std::vector<std::string> joins;
  std::vector<NodeId> replaced;  // the whole variables and slots
  std::vector<std::pair<ValueRef, ValueRef>> variables_and_gradients;
  for (const auto& [variable, gradient] : program.variables_and_gradients) {
    const graph::TensorType type = g.type(variable);
    const std::optional<int64_t> elements = type.shape.num_elements();
    const std::vector<int64_t> rows =
        type.shape.rank() == 0 || !elements
            ? std::vector<int64_t>{1}
            : partition_rows(type.shape.dim(0), *elements * static_cast<int64_t>(graph::dtype_size(type.dtype)), plan);
    if (rows.size() < 2) {
      variables_and_gradients.emplace_back(variable, gradient);
      continue;
    }
    MIRRA_ASSIGN_OR_RETURN(const NodeId update_id, only_update(g, ops, variable, gradient));
    const graph::Node update = g.node(update_id);
    const graph::OpSchema& schema = *ops.find(update.op);
    // What the whole update waited for: the readers of its variable and slots, which will read the
    // parts' join instead (the parts' updates wait for the join), and anything else, which they keep.
    std::set<NodeId> readers;
    for (size_t i : schema.updates) {
      const NodeId state = update.inputs[i].node;
      if (i != 0 && (g.node(state).op != "Variable" || !(g.type(update.inputs[i]) == type))) {
        return graph::invalid_argument("parameter_server cannot cut '" + g.node(variable.node).name + "': operand " + std::to_string(i) +
                                       " of its update '" + update.name + "' is no Variable of its type");
      }
      for (NodeId reader : ops::buffer_readers(g, ops, state)) readers.insert(reader);
      replaced.push_back(state);
    }
    std::vector<NodeId> kept_controls;
    for (NodeId control : update.control_inputs) {
      if (!readers.contains(control)) kept_controls.push_back(control);
    }
    std::vector<ValueRef> parts;
    std::vector<NodeId> part_updates;
    int64_t offset = 0;
    for (size_t p = 0; p < rows.size(); ++p) {
      graph::NodeSpec spec{.op = update.op, .inputs = update.inputs, .attrs = update.attrs,
                           .name = update.name + "/part_" + std::to_string(p)};
      for (size_t i : schema.updates) spec.inputs[i] = part_of(b, g.node(update.inputs[i].node), offset, rows[p], p);
      parts.push_back(spec.inputs[0]);
      std::vector<int64_t> begin(static_cast<size_t>(type.shape.rank()), 0), size = type.shape.dims;
      begin[0] = offset;
      size[0] = rows[p];
      b.set_device(g.node(gradient.node).device);
      ValueRef rows_of_gradient;
      {
        auto scope = b.scope(g.node(variable.node).name + "/part_" + std::to_string(p) + "/gradient");
        rows_of_gradient = ops::slice(b, gradient, begin, size);
      }
      spec.inputs[*schema.update_gradient] = rows_of_gradient;
      b.set_device(update.device);
      part_updates.push_back(b.add(std::move(spec)));
      MIRRA_RETURN_IF_ERROR(b.status());
      variables_and_gradients.emplace_back(parts.back(), rows_of_gradient);
      offset += rows[p];
    }
    b.set_device(g.node(variable.node).device);
    ValueRef join;
    {
      auto scope = b.scope(g.node(variable.node).name + "/parts");
      join = ops::concat(b, parts, 0);
    }
    MIRRA_RETURN_IF_ERROR(b.status());
    joins.push_back(g.node(join.node).name);
    g.replace_all_uses(variable, join);
    for (NodeId id = 0; id < g.size(); ++id) {
      std::vector<NodeId>& controls = g.mutable_node(id).control_inputs;
      if (std::find(controls.begin(), controls.end(), update_id) == controls.end()) continue;
      std::erase(controls, update_id);
      controls.insert(controls.end(), part_updates.begin(), part_updates.end());
    }
    for (size_t p = 0; p < part_updates.size(); ++p) {
      std::vector<NodeId> controls = kept_controls;
      for (size_t i : schema.updates) {
        for (NodeId reader : ops::buffer_readers(g, ops, g.node(part_updates[p]).inputs[i].node)) {
          if (reader != part_updates[p]) controls.push_back(reader);
        }
      }
      g.mutable_node(part_updates[p]).control_inputs = std::move(controls);
    }
  }
  b.set_device(std::nullopt);
  program.variables_and_gradients = std::move(variables_and_gradients);
  prune(program, replaced);
  return joins;
}

}  // namespace mirra::strategies
