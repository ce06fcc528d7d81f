// build_classifier_training: model + objective + minimize, then the graph passes.
#include "examples/classifier_training.h"

#include "ops/ops.h"

namespace mirra::examples {

runtime::training::TrainingGraph ClassifierTraining::training_graph() const {
  return {.features = graph.node(model.images.node).name,
          .labels = graph.node(objective.labels.node).name,
          .loss = objective.loss,
          .correct = objective.correct,
          .train = train.train,
          .learning_rate = train.learning_rate,
          .inference = inference};
}

strategies::TrainingProgram ClassifierTraining::program() const {
  runtime::training::TrainingGraph signature = training_graph();
  signature.inference.reset();
  return {graph, signature, train.variables_and_gradients, train.loss_gradient, train.step_state};
}

graph::Expected<ClassifierTraining> build_classifier_training(std::string_view model, const ops::Optimizer& optimizer,
                                                              uint64_t seed, ops::MixedPrecision mixed_precision,
                                                              const std::vector<graph::DeviceId>& devices) {
  const ModelBuilder build = model_builder(model);
  if (build == nullptr) return graph::invalid_argument("model '" + std::string(model) + "' is not known (" + model_names() + ")");
  ClassifierTraining setup;
  graph::Builder b(setup.graph, ops::registry(), seed);
  setup.model = build(b);
  setup.objective = ops::classifier_objective(b, setup.model.logits);
  MIRRA_RETURN_IF_ERROR(b.status());
  const bool fp16 = mixed_precision == ops::MixedPrecision::fp16;
  MIRRA_ASSIGN_OR_RETURN(setup.train,
                         ops::minimize(b, setup.objective.loss, optimizer,
                                       {.loss_scaling = fp16 ? std::optional(ops::LossScaling{}) : std::nullopt,
                                        .state_updates = setup.model.state_updates}));
  MIRRA_RETURN_IF_ERROR(ops::rewrite_for_training(setup.graph, ops::registry(), mixed_precision, devices,
                                                  {setup.train.train, setup.objective.loss.node, setup.objective.correct.node}));
  runtime::training::TrainingGraph signature = setup.training_graph();
  MIRRA_RETURN_IF_ERROR(ops::add_inference_values(setup.graph, ops::registry(), signature));
  setup.inference = signature.inference;
  return setup;
}

}  // namespace mirra::examples
