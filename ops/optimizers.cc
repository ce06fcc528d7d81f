// minimize: trainable variables, gradients, loss scaling, clipping, slots, update ops and their ordering.
#include "ops/optimizers.h"

#include <algorithm>
#include <iterator>

#include "graph/gradients.h"
#include "ops/array_ops.h"
#include "ops/check_numerics_ops.h"
#include "ops/elementwise_ops.h"
#include "ops/recomputation.h"
#include "ops/loss_scale_ops.h"
#include "ops/optimizer_ops.h"
#include "ops/reduce_ops.h"
#include "ops/source_ops.h"

namespace mirra::ops {

namespace {

// Every node reading `state` runs before `update`.
void order_after_readers(graph::Builder& b, graph::NodeId state, graph::NodeId update) {
  graph::Graph& g = b.graph();
  for (graph::NodeId reader : buffer_readers(g, b.registry(), state)) {
    if (reader != update) g.add_control_edge(reader, update);
  }
}

graph::Status check(const Optimizer& o) {
  static const char* const kKinds[] = {"sgd", "momentum", "adam", "adamw"};
  if (std::find(std::begin(kKinds), std::end(kKinds), o.kind) == std::end(kKinds)) {
    return graph::invalid_argument("optimizer '" + o.kind + "' is not known (sgd, momentum, adam, adamw)");
  }
  if (!(o.learning_rate > 0)) return graph::invalid_argument("learning rate must be positive");
  if (!(o.momentum >= 0 && o.momentum < 1)) return graph::invalid_argument("momentum must be in [0, 1)");
  if (!(o.beta1 >= 0 && o.beta1 < 1) || !(o.beta2 >= 0 && o.beta2 < 1)) {
    return graph::invalid_argument("adam's beta1 and beta2 must be in [0, 1)");
  }
  if (!(o.epsilon > 0)) return graph::invalid_argument("adam's epsilon must be positive");
  if (!(o.weight_decay >= 0 && o.weight_decay < 1e6)) return graph::invalid_argument("weight decay must be in [0, 1e6)");
  for (const std::string& part : o.exclude_from_weight_decay) {
    if (part.empty()) return graph::invalid_argument("exclude_from_weight_decay holds an empty name, which every variable contains");
  }
  if (!(o.clip_global_norm >= 0)) return graph::invalid_argument("clip_global_norm must not be negative");
  return graph::Status();
}

}  // namespace

std::vector<graph::NodeId> buffer_readers(const graph::Graph& g, const graph::OpRegistry& registry, graph::NodeId variable) {
  std::vector<std::vector<graph::NodeId>> consumers(g.size());
  for (const graph::Node& node : g.nodes()) {
    const graph::OpSchema* schema = registry.find(node.op);
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      if (schema == nullptr || !schema->reads_only_shape_of(i)) consumers[node.inputs[i].node].push_back(node.id);
    }
  }
  std::vector<bool> seen(g.size(), false);
  std::vector<graph::NodeId> stack = {variable}, readers;
  while (!stack.empty()) {
    const graph::NodeId id = stack.back();
    stack.pop_back();
    for (graph::NodeId consumer : consumers[id]) {
      if (seen[consumer]) continue;
      seen[consumer] = true;
      readers.push_back(consumer);
      const graph::OpSchema* schema = registry.find(g.node(consumer).op);
      if (schema == nullptr || schema->has(graph::kForwardsInput)) stack.push_back(consumer);
    }
  }
  return readers;
}

std::vector<graph::ValueRef> clip_by_global_norm(graph::Builder& b, const std::vector<graph::ValueRef>& gradients,
                                                 double clip_norm) {
  auto scope = b.scope(kClipByGlobalNormScope);
  graph::ValueRef sum_of_squares = reduce_sum(b, square(b, gradients.front()));
  for (size_t i = 1; i < gradients.size(); ++i) sum_of_squares = add(b, sum_of_squares, reduce_sum(b, square(b, gradients[i])));
  const graph::ValueRef clip = scalar_of(b, clip_norm, gradients.front());
  const graph::ValueRef scale = div(b, clip, maximum(b, sqrt(b, sum_of_squares), clip));
  std::vector<graph::ValueRef> clipped;
  for (graph::ValueRef gradient : gradients) clipped.push_back(mul(b, gradient, scale));
  return clipped;
}

namespace {

graph::Status check(const MinimizeOptions& options) {
  if (!options.loss_scaling) return graph::Status();
  if (options.check_numerics) {
    return graph::invalid_argument("check_numerics and loss scaling exclude each other: loss scaling skips the steps "
                                   "whose gradients overflow");
  }
  const LossScaling& s = *options.loss_scaling;
  if (!(s.initial_scale >= 1 && s.initial_scale <= 3.4e38)) {
    return graph::invalid_argument("the initial loss scale must be in [1, 3.4e38]");
  }
  if (s.growth_steps < 1) return graph::invalid_argument("the loss scale's growth steps must be at least 1");
  return graph::Status();
}

// Loss scaling's state and the scaled loss (see minimize in optimizers.h).
struct ScaledLoss {
  graph::ValueRef scale, good_steps, scaled_loss, inverse;  // inverse: 1 / scale in the loss's dtype
};

ScaledLoss scale_loss(graph::Builder& b, graph::ValueRef loss, const LossScaling& scaling) {
  auto scope = b.scope("loss_scale");
  ScaledLoss s;
  s.scale = variable(b, "scale", graph::Shape{}, Initializer::constant(scaling.initial_scale), graph::DType::f32, false);
  s.good_steps = variable(b, "good_steps", graph::Shape{}, Initializer::zeros(), graph::DType::i64, false);
  const graph::DType dtype = b.type(loss).dtype;
  const graph::ValueRef scale = dtype == graph::DType::f32 ? s.scale : cast(b, s.scale, dtype);
  s.scaled_loss = mul(b, loss, scale);
  s.inverse = div(b, scalar_of(b, 1.0, scale), scale);
  return s;
}

}  // namespace

graph::Expected<TrainOp> minimize(graph::Builder& b, graph::ValueRef loss, const Optimizer& optimizer,
                                  const MinimizeOptions& options) {
  MIRRA_RETURN_IF_ERROR(check(optimizer));
  MIRRA_RETURN_IF_ERROR(check(options));
  graph::Graph& g = b.graph();
  std::vector<graph::ValueRef> variables;
  for (const graph::Node& node : g.nodes()) {
    if (is_trainable_variable(node)) variables.push_back({node.id, 0});
  }
  if (variables.empty()) return graph::invalid_argument("minimize: the graph has no trainable variables");
  const std::optional<ScaledLoss> scaled =
      options.loss_scaling ? std::optional(scale_loss(b, loss, *options.loss_scaling)) : std::nullopt;
  const graph::ValueRef differentiated = scaled ? scaled->scaled_loss : loss;
  graph::ValueRef seed;
  const auto first_gradient = static_cast<graph::NodeId>(g.size());
  {
    auto scope = b.scope("gradients");
    seed = graph::ones_like(b, differentiated);
  }
  MIRRA_ASSIGN_OR_RETURN(const std::vector<graph::ValueRef> gradients,
                         graph::gradients(b, differentiated, variables, seed));
  MIRRA_RETURN_IF_ERROR(recompute_scopes(b, options.recompute, first_gradient).status());
  std::vector<graph::ValueRef> applied = gradients;
  graph::ValueRef finite;  // with loss scaling: whether this step's gradients may be applied
  if (scaled) {
    auto scope = b.scope("loss_scale");
    for (graph::ValueRef& gradient : applied) gradient = mul(b, gradient, scaled->inverse);
    finite = all_finite(b, applied);
  }
  if (optimizer.clip_global_norm > 0) applied = clip_by_global_norm(b, applied, optimizer.clip_global_norm);
  if (options.check_numerics) {
    auto scope = b.scope("check_numerics");
    for (size_t i = 0; i < applied.size(); ++i) {
      applied[i] = ops::check_numerics(b, applied[i], "the gradient of '" + g.node(variables[i].node).name + "'");
    }
  }

  TrainOp result;
  result.loss_gradient = seed;
  const graph::DType dtype = b.type(loss).dtype;
  {
    auto scope = b.scope("optimizer");
    result.learning_rate = variable(b, "learning_rate", graph::Shape{}, Initializer::constant(optimizer.learning_rate),
                                    dtype, /*trainable=*/false);
  }
  result.iterations = variable(b, kIterationsVariable, graph::Shape{}, Initializer::zeros(), graph::DType::i64, false);
  std::vector<graph::NodeId> updates;
  for (size_t i = 0; i < variables.size(); ++i) {
    const graph::ValueRef v = variables[i];
    const graph::Node& node = g.node(v.node);
    const std::string name = node.name;
    const graph::TensorType type = node.outputs[0];
    auto slot = [&](const char* suffix) {
      return variable(b, name + "/" + suffix, type.shape, Initializer::zeros(), type.dtype, /*trainable=*/false);
    };
    const double weight_decay = contains_any(name, optimizer.exclude_from_weight_decay) ? 0.0 : optimizer.weight_decay;
    graph::NodeId update;
    if (optimizer.kind == "sgd") {
      update = apply_gradient_descent(b, v, applied[i], result.learning_rate, weight_decay, finite);
    } else if (optimizer.kind == "momentum") {
      update = apply_momentum(b, v, slot("momentum"), applied[i], result.learning_rate,
                              {.momentum = optimizer.momentum,
                               .nesterov = optimizer.nesterov,
                               .weight_decay = weight_decay,
                               .lazy = optimizer.lazy},
                              finite);
    } else {
      update = apply_adam(b, {v, slot("m"), slot("v"), applied[i], result.learning_rate, result.iterations},
                          {.beta1 = optimizer.beta1,
                           .beta2 = optimizer.beta2,
                           .epsilon = optimizer.epsilon,
                           .weight_decay = weight_decay,
                           .lazy = optimizer.lazy},
                          finite);
    }
    if (update == graph::kInvalidNode) return b.status();
    order_after_readers(b, v.node, update);
    updates.push_back(update);
    result.variables_and_gradients.emplace_back(v, gradients[i]);
  }
  graph::NodeId count_step;
  {
    static constexpr int64_t kOne = 1;
    auto scope = b.scope("optimizer");
    count_step = assign_add(b, result.iterations, constant<int64_t>(b, graph::Shape{}, std::span<const int64_t>(&kOne, 1)),
                            finite);
  }
  if (count_step == graph::kInvalidNode) return b.status();
  order_after_readers(b, result.iterations.node, count_step);
  result.step_state = {result.learning_rate.node, result.iterations.node, g.node(count_step).inputs[1].node, count_step};
  updates.push_back(count_step);
  if (scaled) {
    graph::NodeId rescale;
    {
      auto scope = b.scope("loss_scale");
      rescale = update_loss_scale(b, scaled->scale, scaled->good_steps, finite, options.loss_scaling->growth_steps);
    }
    if (rescale == graph::kInvalidNode) return b.status();
    order_after_readers(b, scaled->scale.node, rescale);
    order_after_readers(b, scaled->good_steps.node, rescale);
    updates.push_back(rescale);
    result.loss_scale = scaled->scale;
  }
  for (graph::NodeId update : options.state_updates) {
    if (update >= g.size()) return graph::invalid_argument("minimize: a state update names no node");
    const graph::OpSchema* schema = b.registry().find(g.node(update).op);
    if (schema == nullptr || schema->updates.empty()) {
      return graph::invalid_argument("minimize: state update '" + g.node(update).name + "' (" + g.node(update).op +
                                     ") writes no variable");
    }
    for (size_t i : schema->updates) {
      if (i < g.node(update).inputs.size()) order_after_readers(b, g.node(update).inputs[i].node, update);
    }
    updates.push_back(update);
  }
  result.train = no_op(b, "train", updates);
  MIRRA_RETURN_IF_ERROR(b.status());
  return result;
}

bool contains_any(std::string_view name, const std::vector<std::string>& parts) {
  return std::any_of(parts.begin(), parts.end(), [&](const std::string& part) { return name.find(part) != std::string_view::npos; });
}

graph::AttrMap optimizer_hyper_parameters(const Optimizer& optimizer) {
  return {{"learning_rate", optimizer.learning_rate}, {"momentum", optimizer.momentum},
          {"nesterov", optimizer.nesterov},           {"beta1", optimizer.beta1},
          {"beta2", optimizer.beta2},                 {"epsilon", optimizer.epsilon},
          {"weight_decay", optimizer.weight_decay},   {"clip_global_norm", optimizer.clip_global_norm},
          {"exclude_from_weight_decay", optimizer.exclude_from_weight_decay},
          {"lazy", optimizer.lazy}};
}

graph::Expected<Optimizer> optimizer_from_hyper_parameters(std::string_view kind, const graph::AttrMap& hyper_parameters) {
  Optimizer o;
  o.kind = std::string(kind);
  const std::pair<const char*, double*> reals[] = {{"learning_rate", &o.learning_rate}, {"momentum", &o.momentum},
                                                   {"beta1", &o.beta1},                 {"beta2", &o.beta2},
                                                   {"epsilon", &o.epsilon},             {"weight_decay", &o.weight_decay},
                                                   {"clip_global_norm", &o.clip_global_norm}};
  for (const auto& [name, value] : hyper_parameters.entries()) {
    bool known = false;
    for (const auto& [real_name, field] : reals) {
      if (name != real_name) continue;
      const double* real = std::get_if<double>(&value);
      if (real == nullptr) return graph::invalid_argument("optimizer hyper-parameter '" + name + "' must be a real number");
      *field = *real;
      known = true;
    }
    if (name == "exclude_from_weight_decay") {
      const auto* names = std::get_if<std::vector<std::string>>(&value);
      if (names == nullptr) {
        return graph::invalid_argument("optimizer hyper-parameter 'exclude_from_weight_decay' must be a list of strings");
      }
      o.exclude_from_weight_decay = *names;
      known = true;
    }
    for (const auto& [flag_name, field] : {std::pair{"nesterov", &o.nesterov}, std::pair{"lazy", &o.lazy}}) {
      if (name != flag_name) continue;
      const bool* flag = std::get_if<bool>(&value);
      if (flag == nullptr) return graph::invalid_argument("optimizer hyper-parameter '" + name + "' must be a bool");
      *field = *flag;
      known = true;
    }
    if (!known) return graph::invalid_argument("optimizer hyper-parameter '" + name + "' is not known");
  }
  MIRRA_RETURN_IF_ERROR(check(o));
  return o;
}

}  // namespace mirra::ops
