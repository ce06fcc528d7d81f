// build_model_program: minimize on a copy of the model graph, then the training passes.
#include "tools/mirra/model_program.h"

#include "ops/ops.h"

namespace mirra::runner {

graph::Expected<runtime::training::TrainingGraph> trainer_signature(const serialization::TrainingSignature& signature) {
  // A classifier counts its correct predictions as the metric "correct"; other objectives have none.
  const graph::ValueRef correct = signature.metric("correct");
  runtime::training::TrainingGraph graph{.features = signature.features,
                                         .labels = signature.labels,
                                         .loss = signature.loss,
                                         .loss_weight = signature.loss_weight,
                                         .correct = correct};
  for (const serialization::BatchInput& input : signature.batch_inputs) {
    graph.batch_inputs.push_back({.name = input.placeholder, .axis = input.axis});
  }
  for (const serialization::Metric& metric : signature.metrics) {
    if (metric.name == "correct") continue;
    graph.metrics.push_back({.name = metric.name,
                             .value = metric.value,
                             .reduction = metric.reduction == "sum"        ? runtime::training::MetricReduction::sum
                                          : metric.reduction == "exp_mean" ? runtime::training::MetricReduction::exp_mean
                                                                           : runtime::training::MetricReduction::mean,
                             .weight = metric.weight});
  }
  return graph;
}

ModelProgramOptions model_program_options(const TrainingConfig& training, const std::vector<graph::DeviceId>& devices) {
  return {.learning_rate = training.learning_rate,
          .weight_decay = training.weight_decay,
          .exclude_from_weight_decay = training.exclude_from_weight_decay,
          .lazy_updates = training.lazy_updates,
          .check_numerics = training.check_numerics,
          .mixed_precision = training.mixed_precision,
          .recompute = training.recompute,
          .devices = devices};
}

graph::Expected<ModelProgram> build_model_program(const serialization::Model& model,
                                                  const ModelProgramOptions& options) {
  const serialization::OptimizerSpec& spec = model.signature.optimizer;
  graph::AttrMap hyper_parameters = spec.hyper_parameters;
  if (options.learning_rate) hyper_parameters.set("learning_rate", *options.learning_rate);
  if (options.weight_decay) hyper_parameters.set("weight_decay", *options.weight_decay);
  if (options.exclude_from_weight_decay) hyper_parameters.set("exclude_from_weight_decay", *options.exclude_from_weight_decay);
  if (options.lazy_updates) hyper_parameters.set("lazy", *options.lazy_updates);
  ModelProgram out;
  MIRRA_ASSIGN_OR_RETURN(out.optimizer, ops::optimizer_from_hyper_parameters(spec.kind, hyper_parameters));
  strategies::TrainingProgram& program = out.program;
  MIRRA_ASSIGN_OR_RETURN(program.signature, trainer_signature(model.signature));
  program.graph = model.graph;
  program.ops = options.ops;
  graph::Builder b(program.graph, *options.ops);
  ops::MinimizeOptions minimize_options{.check_numerics = options.check_numerics,
                                        .loss_scaling = options.mixed_precision == ops::MixedPrecision::fp16
                                                            ? std::optional(ops::LossScaling{})
                                                            : std::nullopt};
  minimize_options.recompute = ops::recompute_scopes_of(program.graph, options.recompute);
  for (const std::string& update : model.signature.state_updates) {
    minimize_options.state_updates.push_back(*program.graph.find(update));  // the reader checked it
  }
  MIRRA_ASSIGN_OR_RETURN(const ops::TrainOp train, ops::minimize(b, model.signature.loss, out.optimizer, minimize_options));
  std::vector<graph::NodeId> fetched = {train.train, model.signature.loss.node};
  if (program.signature.correct.valid()) fetched.push_back(program.signature.correct.node);
  MIRRA_RETURN_IF_ERROR(ops::rewrite_for_training(program.graph, *options.ops, options.mixed_precision, options.devices, fetched));
  program.signature.train = train.train;
  program.signature.learning_rate = train.learning_rate;
  program.variables_and_gradients = train.variables_and_gradients;
  program.loss_gradient = train.loss_gradient;
  program.step_state = train.step_state;
  out.learning_rate_variable = program.graph.node(train.learning_rate.node).name;
  return out;
}

}  // namespace mirra::runner
