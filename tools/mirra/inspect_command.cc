// mirra inspect: what a model file holds (ops, parameters, the forward pass's multiply-adds, inputs,
// signature, metadata, the memory it plans at a batch size), or, with a strategy, the training graph that strategy makes of it, as text or DOT.
#include <nlohmann/json.hpp>

#include <cstdio>
#include <map>
#include <optional>

#include "graph/dot.h"
#include "graph/print.h"
#include "ops/model_cost.h"
#include "ops/registry.h"
#include "ops/source_ops.h"
#include "runtime/memory_estimate.h"
#include "strategies/config_json.h"
#include "strategies/pruning.h"
#include "tools/mirra/commands.h"
#include "tools/mirra/model_program.h"
#include "tools/mirra/node_roles.h"
#include "tools/mirra/svg.h"

namespace mirra::runner {

namespace {

// What runtime::estimate_memory plans for the forward pass (the loss and the metrics), and for training
// on one device when the model trains (pruned as a strategy prunes it; the runner's --memory-limit is
// checked against the distributed version of the latter).
void print_memory(const InspectCommand& command, const serialization::Model& model) {
  std::vector<graph::NodeId> forward_roots = {model.signature.loss.node};
  for (const serialization::Metric& metric : model.signature.metrics) forward_roots.push_back(metric.value.node);
  const runtime::DimBindings dims{.batch_size = command.batch_size, .schemas = &ops::registry()};
  const auto forward = runtime::estimate_memory(model.graph, dims, forward_roots);
  if (!forward.ok()) return;
  std::printf("memory at batch %lld: forward pass about %s", static_cast<long long>(command.batch_size),
              runtime::format_bytes(forward->peak_bytes).c_str());
  const runtime::MemoryEstimate* largest = &*forward;
  std::optional<runtime::MemoryEstimate> training;
  if (auto program = build_model_program(model); program.ok()) {
    strategies::prune(program->program);
    if (auto estimate = runtime::estimate_memory(program->program.graph, dims); estimate.ok()) {
      training = std::move(*estimate);
      largest = &*training;
      std::printf(", training on one device about %s", runtime::format_bytes(training->peak_bytes).c_str());
    }
  }
  std::printf("\n  largest:");
  for (const runtime::TensorEstimate& t : largest->largest) {
    std::printf(" %s %s %s;", t.node.c_str(), t.type.to_string().c_str(), runtime::format_bytes(t.bytes).c_str());
  }
  std::printf("\n");
}

// Multiply-adds per example of the loss's forward pass (ops/model_cost.h).
void print_forward_cost(const serialization::Model& model) {
  const graph::NodeId loss = model.signature.loss.node;
  const auto cost = ops::forward_cost(model.graph, std::span(&loss, 1), ops::registry());
  if (!cost.ok()) return;
  std::printf("  forward pass: %.4g G multiply-adds per example (%lld convolutions, %lld matrix products, %lld attentions; "
              "twice as many FLOPs)\n",
              static_cast<double>(cost->multiply_adds) * 1e-9, static_cast<long long>(cost->convolutions),
              static_cast<long long>(cost->matrix_products), static_cast<long long>(cost->attentions));
  // A language model's examples are windows of token ids: its cost per token, as the scaling-law papers
  // count training (6 FLOPs per parameter a token meets, and the attention's).
  const auto features = model.graph.find(model.signature.features);
  if (!features) return;
  const graph::TensorType& tokens = model.graph.node(*features).outputs[0];
  if (graph::is_floating(tokens.dtype) || tokens.shape.rank() != 2 || tokens.shape.dim(1) < 1) return;
  const double per_token = 1.0 / static_cast<double>(tokens.shape.dim(1));
  const double attention = static_cast<double>(cost->attention_multiply_adds) * per_token;
  const double products = static_cast<double>(cost->multiply_adds) * per_token - attention;
  std::printf("  per token: %.4g M multiply-adds forward; training %.4g M FLOPs (6 per product weight: %.4g M, attention: %.4g M)\n",
              (products + attention) * 1e-6, 6 * (products + attention) * 1e-6, 6 * products * 1e-6, 6 * attention * 1e-6);
}

void print_summary(const InspectCommand& command, const serialization::Model& model) {
  const graph::Graph& g = model.graph;
  std::map<std::string, int> ops;
  int64_t parameters = 0, trainable = 0;
  for (const graph::Node& node : g.nodes()) {
    ++ops[node.op];
    if (node.op != "Variable") continue;
    const int64_t elements = node.outputs[0].shape.num_elements().value_or(0);
    parameters += elements;
    if (ops::is_trainable_variable(node)) trainable += elements;
  }
  std::printf("model %s\n", command.model.c_str());
  std::printf("  producer %s, created %s\n", model.metadata.producer.c_str(), model.metadata.created.c_str());
  if (!model.metadata.description.empty()) std::printf("  %s\n", model.metadata.description.c_str());
  std::printf("  %zu nodes, %lld parameters (%lld trainable) in %zu stored weights\n", g.size(),
              static_cast<long long>(parameters), static_cast<long long>(trainable), model.weights.size());
  print_forward_cost(model);
  std::printf("ops:");
  for (const auto& entry : ops) std::printf(" %s x%d", entry.first.c_str(), entry.second);
  std::printf("\ninputs:\n");
  for (const graph::Node& node : g.nodes()) {
    if (node.op == "Placeholder") std::printf("  %s: %s\n", node.name.c_str(), node.outputs[0].to_string().c_str());
  }
  std::printf("variables:\n");
  for (const graph::Node& node : g.nodes()) {
    if (node.op != "Variable") continue;
    std::printf("  %s: %s", node.name.c_str(), node.outputs[0].to_string().c_str());
    if (ops::variable_aggregation(node) != ops::VariableAggregation::none) {
      std::printf(", aggregation %s", std::string(ops::aggregation_name(ops::variable_aggregation(node))).c_str());
      if (ops::variable_synchronization(node) == ops::VariableSynchronization::on_read) std::printf(", synchronized on read");
    }
    std::printf("\n");
  }
  const serialization::TrainingSignature& s = model.signature;
  std::printf("signature: features %s, labels %s, loss %s (%s)", s.features.c_str(), s.labels.c_str(),
              g.node(s.loss.node).name.c_str(), g.type(s.loss).to_string().c_str());
  for (const serialization::BatchInput& input : s.batch_inputs) {
    std::printf(", batch input %s (axis %lld)", input.placeholder.c_str(), static_cast<long long>(input.axis));
  }
  for (const auto& m : s.metrics) {
    std::printf(", metric %s = %s (%s", m.name.c_str(), g.node(m.value.node).name.c_str(), m.reduction.c_str());
    if (m.weight.valid()) std::printf(" over %s", g.node(m.weight.node).name.c_str());
    std::printf(")");
  }
  if (s.loss_weight.valid()) std::printf(", loss weight %s", g.node(s.loss_weight.node).name.c_str());
  for (const std::string& update : s.state_updates) std::printf(", state update %s", update.c_str());
  std::printf("\noptimizer: %s", s.optimizer.kind.c_str());
  for (const auto& entry : s.optimizer.hyper_parameters.entries()) {
    std::printf(" %s=%s", entry.first.c_str(), graph::attr_to_string(entry.second).c_str());
  }
  std::printf(", %zu state tensors\n", s.optimizer.state.size());
  print_memory(command, model);
}

// The graph's picture, printed or rendered to --svg; `comment` (DOT comments) leads it.
graph::Status print_dot(const InspectCommand& command, const graph::Graph& graph, const std::string& comment) {
  const std::string dot = comment + graph::to_dot(graph, {.collapse_below = command.collapse_below, .role = dot_role});
  if (command.svg.empty()) {
    std::fputs(dot.c_str(), stdout);
    return graph::Status();
  }
  MIRRA_RETURN_IF_ERROR(render_svg(dot, command.svg));
  std::printf("wrote %s\n", command.svg.c_str());
  return graph::Status();
}

graph::Status inspect(const InspectCommand& command) {
  if (!command.svg.empty() && !command.dot) return graph::invalid_argument("--svg draws the --dot picture: add --dot");
  MIRRA_ASSIGN_OR_RETURN(const serialization::Model model, serialization::load_model(command.model, ops::registry()));
  if (command.strategy.empty()) {
    if (command.dot) return print_dot(command, model.graph, "");
    print_summary(command, model);
    return graph::Status();
  }
  nlohmann::json config_json = {{"strategy", command.strategy}, {"logical_gpus_per_gpu", command.logical_gpus_per_gpu}};
  if (!command.devices.empty()) config_json["devices"] = command.devices;
  if (command.shard_optimizer_state) config_json["shard_optimizer_state"] = true;
  if (command.min_shard_bytes > 0) config_json["min_shard_bytes"] = command.min_shard_bytes;
  if (!command.update_mode.empty()) config_json["update_mode"] = command.update_mode;
  const bool cluster_given = command.servers != 1 || command.workers != 1;
  if (cluster_given && command.strategy != "parameter_server") {
    return graph::invalid_argument("--servers and --workers shape a parameter_server cluster, not " + command.strategy);
  }
  MIRRA_ASSIGN_OR_RETURN(strategies::StrategyConfig config,
                         strategies::strategy_config_from_json(config_json, "--strategy/--devices/--min-shard-bytes/--update-mode"));
  config.cluster = {.servers = command.servers, .workers = command.workers};
  MIRRA_ASSIGN_OR_RETURN(const ops::MixedPrecision mixed_precision, ops::parse_mixed_precision(command.mixed_precision));
  MIRRA_ASSIGN_OR_RETURN(const auto strategy, strategies::make_strategy(config));
  MIRRA_ASSIGN_OR_RETURN(const ModelProgram program,
                         build_model_program(model, {.mixed_precision = mixed_precision, .devices = strategy->config().devices}));
  MIRRA_ASSIGN_OR_RETURN(const strategies::TrainingProgram distributed, strategy->distribute(program.program));
  // Where the gradients are summed, as a comment of the format printed.
  const auto count = [](int n, const char* what) { return std::to_string(n) + " " + what + (n == 1 ? "" : "s"); };
  const std::string plan = config.strategy == "parameter_server"
                               ? std::string(config.asynchronous ? "none (each worker's gradients applied as they come; "
                                                                 : "none (each variable's server sums its gradients; ") +
                                     count(command.servers, "server") +
                                     " and " + count(command.workers, "worker") + " shown)"
                               : describe(strategy->all_reduce_plan(), strategy->config().devices);
  if (command.dot) return print_dot(command, distributed.graph, "// all-reduce: " + plan + "\n");
  std::printf("# all-reduce: %s\n", plan.c_str());
  std::fputs(graph::to_text(distributed.graph).c_str(), stdout);
  return graph::Status();
}

}  // namespace

int run_inspect(const InspectCommand& command) {
  const graph::Status status = inspect(command);
  return status.ok() ? 0 : report_error(status);
}

}  // namespace mirra::runner
