// Training from a program of one's own on data numpy wrote: an .npz of images and labels (say
// np.savez("train.npz", images=u8[N, 28, 28, 1], labels=u8[N])) opened as a data set, its fields fed
// to the placeholders of a classifier built with the C++ API (the images scaled to [0, 1]), trained
// with MirroredStrategy over two logical CPU devices. The last line of stdout is JSON:
// {"examples": ..., "mean_loss": ..., "accuracy": ...} over the steps trained.
//
//   npz_classifier TRAIN.npz [STEPS]
#include <cstdio>
#include <cstdlib>
#include <string>

#include "ops/ops.h"
#include "runtime/data/dataset.h"
#include "runtime/data/numpy_file.h"
#include "runtime/session.h"
#include "runtime/training/trainer.h"
#include "strategies/strategy.h"

using namespace mirra;

namespace {

graph::Expected<runtime::training::EpochMetrics> train(const std::string& path, int64_t steps) {
  // The model: images -> 64 ReLU units -> 10 logits, with the classifier objective.
  strategies::TrainingProgram program;
  graph::Builder b(program.graph, ops::registry(), /*seed=*/7);
  const graph::ValueRef images = ops::placeholder(b, "images", graph::DType::f32, {-1, 28, 28, 1});
  graph::ValueRef x = ops::reshape(b, images, {-1, 784});
  for (const auto& [name, in, out] : {std::tuple{"fc1", 784, 64}, std::tuple{"fc2", 64, 10}}) {
    auto scope = b.scope(name);
    auto w = ops::variable(b, "w", {in, out}, ops::Initializer::glorot_uniform());
    x = ops::bias_add(b, ops::matmul(b, x, w), ops::variable(b, "b", {out}));
    if (out != 10) x = ops::relu(b, x);
  }
  const ops::ClassifierObjective objective = ops::classifier_objective(b, x);
  MIRRA_ASSIGN_OR_RETURN(const ops::TrainOp op, ops::minimize(b, objective.loss, ops::Optimizer::momentum_sgd(0.05, 0.9)));
  program.signature = {.features = "images", .labels = "labels", .loss = objective.loss, .correct = objective.correct,
                       .train = op.train, .learning_rate = op.learning_rate};
  program.variables_and_gradients = op.variables_and_gradients;
  program.loss_gradient = op.loss_gradient;
  program.step_state = op.step_state;
  MIRRA_ASSIGN_OR_RETURN(const auto strategy, strategies::make_strategy({.strategy = "mirrored", .devices = {{graph::DeviceKind::cpu, 0},
                                                                                                           {graph::DeviceKind::cpu, 1}}}));
  MIRRA_ASSIGN_OR_RETURN(const strategies::TrainingProgram mirrored, strategy->distribute(program));

  // The data: the npz's arrays as fields, each converted to its placeholder's dtype and shape.
  MIRRA_ASSIGN_OR_RETURN(auto source, runtime::data::numpy_source({path}));
  MIRRA_ASSIGN_OR_RETURN(const runtime::data::Dataset data,
                         runtime::data::Dataset::create(source,
                                                        {{.placeholder = "images", .field = "images", .dtype = graph::DType::f32,
                                                          .shape = {28, 28, 1}, .scale = {1.0 / 255.0}},
                                                         {.placeholder = "labels", .field = "labels", .dtype = graph::DType::i64}},
                                                        {.batch_size = 128, .seed = 7}));
  runtime::Session session(mirrored.graph, ops::kernels());
  runtime::training::Trainer trainer(session, mirrored.signature, {.epochs = 0, .max_steps = steps});
  MIRRA_ASSIGN_OR_RETURN(const auto history, trainer.fit(data));
  return history.back();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: npz_classifier TRAIN.npz [STEPS]\n");
    return 2;
  }
  const auto epoch = train(argv[1], argc > 2 ? std::atoll(argv[2]) : 200);
  if (!epoch.ok()) {
    std::fprintf(stderr, "npz_classifier: %s\n", epoch.status().to_string().c_str());
    return 2;
  }
  std::printf("{\"examples\": %lld, \"mean_loss\": %.6f, \"accuracy\": %.6f}\n", static_cast<long long>(epoch->examples),
              epoch->mean_loss, epoch->accuracy.value_or(0.0));
  return 0;
}
