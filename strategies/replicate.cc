// replicate: the checks of the program, then the passes of strategies/replicate_passes.h in their
// order, then the rest of the result's signature.
#include "strategies/replicate.h"

#include "graph/verify.h"
#include "ops/ops.h"
#include "strategies/batch_mean_loss.h"
#include "strategies/replicate_passes.h"

namespace mirra::strategies {

namespace {

// The result's train and accumulate targets, learning rate, aggregated gradients and step state.
graph::Status finish_signature(ReplicaGraph& r) {
  const TrainingProgram& p = r.program;
  TrainingProgram& result = r.result;
  result.ops = p.ops;
  result.signature = p.signature;
  result.signature.train = r.copies[p.signature.train][0];
  result.signature.synchronize = r.synchronize;
  result.accumulate_gradients = p.accumulate_gradients;
  for (graph::NodeId write : r.writes) r.graph.add_control_edge(write, result.signature.train);
  if (p.accumulate_gradients) {
    for (graph::NodeId clear : r.clears) r.graph.add_control_edge(clear, result.signature.train);
    result.signature.accumulate = ops::no_op(r.builder, "accumulate", r.accumulations);
    r.on(kHost, {result.signature.accumulate, 0});
  }
  if (p.signature.learning_rate.valid()) result.signature.learning_rate = r.copy_on(p.signature.learning_rate, 0);
  for (size_t j = 0; j < p.variables_and_gradients.size(); ++j) {
    result.variables_and_gradients.emplace_back(r.copy_on(p.variables_and_gradients[j].first, 0), r.aggregated[j][0]);
  }
  for (graph::NodeId id : p.step_state) result.step_state.push_back(r.copies[id][0]);
  return r.builder.status();
}

bool is_value_of(const graph::Graph& g, graph::ValueRef value) {
  return value.node < g.size() && value.output < g.node(value.node).outputs.size();
}

// A declared weight (of the loss, `what`, or of a metric) is a floating scalar computed from the batch
// alone (no variable reaches it).
graph::Status check_weight(const ReplicaGraph& r, graph::ValueRef weight, const std::string& what) {
  if (!weight.valid()) return graph::Status();
  const graph::Graph& g = r.program.graph;
  if (!is_value_of(g, weight)) return graph::invalid_argument("replicate: the " + what + " is not a value of the program");
  const std::string name = "replicate: the " + what + " '" + g.node(weight.node).name + "'";
  if (g.type(weight).shape.rank() != 0 || !graph::is_floating(g.type(weight).dtype)) {
    return graph::invalid_argument(name + " must be a floating scalar, not " + g.type(weight).to_string());
  }
  if (!r.classification.from_batch[weight.node]) return graph::invalid_argument(name + " does not depend on the batch");
  std::vector<bool> reaches(g.size(), false);
  for (graph::NodeId id : r.order) {
    reaches[id] = g.node(id).op == "Variable";
    for (graph::ValueRef input : g.node(id).inputs) reaches[id] = reaches[id] || reaches[input.node];
  }
  if (reaches[weight.node]) return graph::invalid_argument(name + " depends on a variable; it must count what the batch holds");
  return graph::Status();
}

// The loss's weight, and each metric a scalar value of the program with a fit weight.
graph::Status check_signature(const ReplicaGraph& r) {
  const graph::Graph& g = r.program.graph;
  MIRRA_RETURN_IF_ERROR(check_weight(r, r.program.signature.loss_weight, "loss weight"));
  for (const runtime::training::TrainingMetric& metric : r.program.signature.metrics) {
    if (!is_value_of(g, metric.value) || g.type(metric.value).shape.rank() != 0) {
      return graph::invalid_argument("replicate: metric '" + metric.name + "' is not a scalar value of the program");
    }
    MIRRA_RETURN_IF_ERROR(check_weight(r, metric.weight, "weight of metric '" + metric.name + "'"));
  }
  return graph::Status();
}

}  // namespace

graph::Expected<TrainingProgram> replicate(const TrainingProgram& p, const ReplicationPlan& plan,
                                           const PassObserver& after_each_pass) {
  if (plan.devices.empty()) return graph::invalid_argument("replicate: no devices");
  if (plan.shard_optimizer_state && !plan.mirror_state) {
    return graph::invalid_argument("replicate: sharded optimizer state needs mirrored state");
  }
  const auto features = p.graph.find(p.signature.features);
  if (!features) return graph::invalid_argument("replicate: no batch input named '" + p.signature.features + "'");
  if (!p.loss_gradient.valid() || p.loss_gradient.node >= p.graph.size()) {
    return graph::invalid_argument("replicate: the program does not name the seed of its gradients (loss_gradient)");
  }
  MIRRA_ASSIGN_OR_RETURN(std::vector<graph::NodeId> order, p.graph.topological_order());
  ReplicaGraph r(p, plan, std::move(order));
  for (const runtime::training::BatchInput& input : p.signature.batch_inputs) {
    const auto id = p.graph.find(input.name);
    if (!id || p.graph.node(*id).op != "Placeholder" || p.graph.node(*id).outputs[0].shape.rank() == 0) {
      return graph::invalid_argument("replicate: batch input '" + input.name + "' is not a placeholder with a batch dim");
    }
    const int64_t rank = p.graph.node(*id).outputs[0].shape.rank();
    if (input.axis < 0 || input.axis >= rank) {
      return graph::invalid_argument("replicate: batch input '" + input.name + "' has no axis " +
                                     std::to_string(input.axis) + " (it has " + std::to_string(rank) + ")");
    }
  }
  if (!r.classification.batch_input[*features]) {
    return graph::invalid_argument("replicate: '" + p.signature.features + "' is not a batch input (" +
                                   (p.signature.batch_inputs.empty() ? "dim 0 unknown" : "the signature's batch inputs") +
                                   ")");
  }
  MIRRA_RETURN_IF_ERROR(check_signature(r));
  MIRRA_ASSIGN_OR_RETURN(r.batch_mean, batch_mean_of(p.graph, *p.ops, p.signature.loss, r.classification.from_batch,
                                                     p.signature.loss_weight));
  struct Pass {
    const char* name;
    graph::Status (*run)(ReplicaGraph&);
  };
  std::vector<Pass> passes = {{"clone_per_replica", clone_per_replica}, {"split_batch_inputs", split_batch_inputs}};
  if (plan.sync_batch_norm) passes.push_back({"synchronise_batch_norm", synchronise_batch_norm});
  passes.insert(passes.end(), {
      {"weight_gradient_seeds", weight_gradient_seeds},
      {"aggregate_state", aggregate_state},
      plan.shard_optimizer_state ? Pass{"shard_optimizer_updates", shard_optimizer_updates}
                                 : Pass{"aggregate_gradients", aggregate_gradients},
      {"finish_signature", finish_signature},
      {"report_metrics", report_metrics},
  });
  for (const Pass& pass : passes) {
    MIRRA_RETURN_IF_ERROR(pass.run(r));
    if (after_each_pass) after_each_pass(pass.name, r.graph);
  }
  MIRRA_RETURN_IF_ERROR(graph::verify_structure(r.graph));
  TrainingProgram result = std::move(r.result);
  result.graph = std::move(r.graph);
  return result;
}

}  // namespace mirra::strategies
