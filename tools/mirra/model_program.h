// From a model file to a program a strategy can distribute: the model graph plus autodiff and the
// optimizer's updates (ops::minimize, with the file's optimizer and hyper-parameters, the learning
// rate overridden when asked), Conv2D + BiasAdd + Relu fused, mixed precision applied when asked (fp16
// with dynamic loss scaling; 16-bit activations where they pay), and the Trainer's signature.
#pragma once

#include <optional>

#include "ops/mixed_precision.h"
#include "ops/recomputation.h"
#include "ops/optimizers.h"
#include "ops/registry.h"
#include "serialization/model_file.h"
#include "strategies/strategy.h"
#include "tools/mirra/run_config.h"

namespace mirra::runner {

struct ModelProgram {
  strategies::TrainingProgram program;
  ops::Optimizer optimizer;
  std::string learning_rate_variable;  // configuration, not state: never checkpointed
};

// Errors (invalid_argument) name what in the model cannot be trained: an unknown optimizer or
// hyper-parameter, a signature without a "correct" metric, a loss nothing trainable feeds.
struct ModelProgramOptions {
  // The op schemas the model was loaded with (serialization::load_model): a program that embeds mirra
  // and registers ops of its own passes its registry; the program keeps it (TrainingProgram::ops).
  const graph::OpRegistry* ops = &mirra::ops::registry();
  std::optional<double> learning_rate;  // unset: the model file's
  std::optional<double> weight_decay;   // unset: the model file's
  std::optional<std::vector<std::string>> exclude_from_weight_decay;  // unset: the model file's
  std::optional<bool> lazy_updates;     // unset: the model file's (ops::Optimizer::lazy)
  bool check_numerics = false;          // every gradient checked for NaN and infinity before its update
  ops::MixedPrecision mixed_precision = ops::MixedPrecision::off;
  ops::Recompute recompute = ops::Recompute::none;  // activations computed again in the backward pass
  // Where the strategy will place the program: with bf16 on CPUs that multiply it natively, the
  // activations between the products stay 16-bit (ops/sixteen_bit_activations.h).
  std::vector<graph::DeviceId> devices;
};

graph::Expected<ModelProgram> build_model_program(const serialization::Model& model,
                                                  const ModelProgramOptions& options = {});

// The options a run's training settings give, for a strategy over `devices`.
ModelProgramOptions model_program_options(const TrainingConfig& training, const std::vector<graph::DeviceId>& devices);

// What the Trainer runs of a model file's signature: its batch inputs, loss, loss weight, "correct"
// metric (a classifier's; other objectives have none) and its other metrics; no train target.
graph::Expected<runtime::training::TrainingGraph> trainer_signature(const serialization::TrainingSignature& signature);

}  // namespace mirra::runner
