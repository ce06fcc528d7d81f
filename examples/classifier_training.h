// A benchmark model made ready to train: the model, its classifier objective (labels placeholder
// "labels", mean cross-entropy, correct count) and the optimizer's update ops, in one graph, and the
// names the Trainer needs, with Conv2D + BiasAdd + Relu chains fused. The benchmark settings are SGD
// with momentum 0.9 and learning rate 0.05.
//
//   auto setup = examples::build_classifier_training("cnn", examples::benchmark_optimizer(), /*seed=*/1);
//   runtime::Session session(setup->graph, ops::kernels());
//   runtime::training::Trainer trainer(session, setup->training_graph(), {.epochs = 3});
#pragma once

#include <string_view>

#include "examples/models.h"
#include "ops/classification.h"
#include "ops/mixed_precision.h"
#include "ops/optimizers.h"
#include "runtime/training/trainer.h"
#include "strategies/strategy.h"

namespace mirra::examples {

struct ClassifierTraining {
  graph::Graph graph;
  Classifier model;
  ops::ClassifierObjective objective;
  ops::TrainOp train;
  // Evaluation's values in inference mode (batch normalisation's moving statistics), where they differ.
  std::optional<runtime::training::InferenceValues> inference;

  runtime::training::TrainingGraph training_graph() const;
  // The same as a one-replica program, for a strategy to distribute (copies the graph; the strategy
  // makes the inference values of its own graph).
  strategies::TrainingProgram program() const;
};

inline ops::Optimizer benchmark_optimizer() { return ops::Optimizer::momentum_sgd(0.05, 0.9); }

// `model` is "mlp" or "cnn"; the graph is fused (ops/fusion.h) and, when asked, rewritten for mixed
// precision (ops/mixed_precision.h), with 16-bit activations where they pay on `devices`, those the
// strategy will place it on (ops/sixteen_bit_activations.h); fp16 scales its loss dynamically
// (ops::LossScaling's defaults), as `mirra train` does.
graph::Expected<ClassifierTraining> build_classifier_training(
    std::string_view model, const ops::Optimizer& optimizer, uint64_t seed,
    ops::MixedPrecision mixed_precision = ops::MixedPrecision::off, const std::vector<graph::DeviceId>& devices = {});

}  // namespace mirra::examples
