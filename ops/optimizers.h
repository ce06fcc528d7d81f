// minimize(b, loss, optimizer): the gradients of loss for every trainable variable (clipped by their
// global norm when asked), and one update op per variable, grouped under a NoOp target named "train".
// Slots are non-trainable variables created beside the variable they belong to ("<variable>/momentum",
// "<variable>/m", "<variable>/v"). The learning rate is a non-trainable scalar variable
// ("optimizer/learning_rate"), so a schedule can change it between steps; "optimizer/iterations"
// (i64) counts the steps taken and is incremented after every update of a step.
//
//   auto train = ops::minimize(b, loss, ops::Optimizer::momentum_sgd(0.05, 0.9));
//   session.run(feeds, {}, {train->train});
//
// With loss scaling (for f16 gradients; TensorFlow's LossScaleOptimizer), the gradients are those of
// loss * "loss_scale/scale", divided by it again before clipping and the updates; a step where any of
// them is not finite changes no variable, slot or counter, and UpdateLossScale moves the scale
// (ops/loss_scale_ops.h). The scale and its count of good steps ("loss_scale/good_steps") are
// non-trainable variables, so checkpoints keep them.
//
// ENSURES: each update runs after every node that reads its variable (control edges), so a step
// reads the old values everywhere and writes the new ones once.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "graph/builder.h"

namespace mirra::ops {

// The names minimize gives the optimizer's step counter and loss scaling's state.
inline constexpr std::string_view kIterationsVariable = "optimizer/iterations";
inline constexpr std::string_view kLossScaleVariable = "loss_scale/scale";
inline constexpr std::string_view kLossScaleGoodStepsVariable = "loss_scale/good_steps";

// Whether `name` is loss scaling's state, which only runs with fp16 mixed precision have.
inline bool is_loss_scale_variable(std::string_view name) {
  return name == kLossScaleVariable || name == kLossScaleGoodStepsVariable;
}

struct Optimizer {
  std::string kind = "sgd";  // sgd, momentum, adam, adamw
  double learning_rate = 0.01;
  double momentum = 0.0;  // momentum
  bool nesterov = false;  // momentum
  double beta1 = 0.9, beta2 = 0.999, epsilon = 1e-7;  // adam, adamw
  // Decoupled weight decay, every kind (SGDW, AdamW; Keras's optimizers' weight_decay): each step first
  // scales a variable by 1 - learning_rate * weight_decay, then applies its update. L2 in the loss is
  // ops::l2_regularization instead.
  double weight_decay = 0.0;
  // Variables whose name contains one of these are not decayed (Keras's exclude_from_weight_decay;
  // {"gamma", "beta", "bias"} keeps batch normalisation's parameters and biases out).
  std::vector<std::string> exclude_from_weight_decay;
  double clip_global_norm = 0.0;  // > 0: scale all gradients by min(1, clip / global norm) first
  // momentum, adam: an embedding table (a variable whose gradient is the rows of its lookups) updates
  // the rows a step looks up alone, with their slots (TensorFlow's sparse momentum, LazyAdam), where
  // the update can read those rows (ops/sparse_updates.h); false: every row, as the dense update does.
  bool lazy = false;

  static Optimizer sgd(double learning_rate) { return {"sgd", learning_rate}; }
  static Optimizer momentum_sgd(double learning_rate, double momentum, bool nesterov = false) {
    return {"momentum", learning_rate, momentum, nesterov};
  }
  static Optimizer adam(double learning_rate) { return {.kind = "adam", .learning_rate = learning_rate}; }
  static Optimizer adamw(double learning_rate, double weight_decay) {
    return {.kind = "adamw", .learning_rate = learning_rate, .weight_decay = weight_decay};
  }
};

// Dynamic loss scaling, with TensorFlow's defaults.
struct LossScaling {
  double initial_scale = 32768;  // 2^15
  int64_t growth_steps = 2000;   // finite steps in a row before the scale doubles
};

struct MinimizeOptions {
  // Each gradient passes a CheckNumerics node before its update, so a step with a NaN or infinite
  // gradient fails (naming the variable) instead of applying it. Not with loss scaling, which expects
  // such steps and skips them.
  bool check_numerics = false;
  std::optional<LossScaling> loss_scaling;
  // Other writes of state the train step runs too, each after every reader of what it writes (moving
  // statistics; TensorFlow's UPDATE_OPS). Under a replicating strategy, one that writes from each
  // replica's own values needs its variable's aggregation (ops::VariableAggregation).
  std::vector<graph::NodeId> state_updates;
  // Name-scope prefixes whose activations the backward pass computes again instead of keeping them
  // (ops/recomputation.h; recompute_scopes_of gives them for `training.recompute`).
  std::vector<std::string> recompute;
};

struct TrainOp {
  graph::NodeId train = graph::kInvalidNode;                          // run it as a target
  // Each trainable variable with its gradient as autodiff made it (before clipping): a strategy
  // aggregates these across replicas, and everything downstream then sees the aggregate.
  std::vector<std::pair<graph::ValueRef, graph::ValueRef>> variables_and_gradients;
  // The seed autodiff started from (ones: the loss's gradient of itself). Every gradient is linear in
  // it, so a strategy scales each replica's gradients by scaling its seed.
  graph::ValueRef loss_gradient;
  graph::ValueRef learning_rate;  // f32/f64 scalar variable
  graph::ValueRef iterations;     // i64 scalar variable
  graph::ValueRef loss_scale;     // with loss scaling: the f32 scalar variable
  // The optimizer's step state, which exists once however many replicas train: the learning rate,
  // the iteration counter and the nodes that increment it.
  std::vector<graph::NodeId> step_state;
};

// The scope of clip_by_global_norm's nodes.
inline constexpr std::string_view kClipByGlobalNormScope = "clip_by_global_norm";
// The gradients scaled by min(1, clip_norm / sqrt(sum of their squared elements)), as one group: each
// multiplied (Mul(gradient, scale)) by scale = clip_norm / max(norm, clip_norm).
std::vector<graph::ValueRef> clip_by_global_norm(graph::Builder& b, const std::vector<graph::ValueRef>& gradients,
                                                 double clip_norm);

graph::Expected<TrainOp> minimize(graph::Builder& b, graph::ValueRef loss, const Optimizer& optimizer,
                                  const MinimizeOptions& options = {});

// Every node that reads `variable`'s buffer: its consumers, and the consumers of those that forward
// it (kForwardsInput: Identity, Reshape). Nodes further on read other buffers, so an update need not
// wait for them: the last layer's update overlaps the rest of the backward pass. An input read only
// for its shape (OpSchema::reads_only_shape: SumToShape's `like`) reads no buffer. minimize orders
// each update after these readers of its variable and slots.
std::vector<graph::NodeId> buffer_readers(const graph::Graph& g, const graph::OpRegistry& registry, graph::NodeId variable);

// Whether `name` contains one of `parts`: how exclude_from_weight_decay (and kernel_variables) match.
bool contains_any(std::string_view name, const std::vector<std::string>& parts);

// The optimizer's settings as typed attributes (how model files store them), and back. Reading
// rejects unknown names, wrong types and out-of-range values, naming the attribute.
graph::AttrMap optimizer_hyper_parameters(const Optimizer& optimizer);
graph::Expected<Optimizer> optimizer_from_hyper_parameters(std::string_view kind, const graph::AttrMap& hyper_parameters);

}  // namespace mirra::ops
