// Time to accuracy: epochs and seconds until the test accuracy reaches the target.
#include "bench/time_to_accuracy.h"

#include <cstdio>

#include "examples/classifier_training.h"
#include "ops/ops.h"
#include "runtime/data/fashion_mnist.h"

namespace mirra::bench {

graph::Expected<nlohmann::json> run_time_to_accuracy(const TimeToAccuracyOptions& options) {
  using runtime::data::Split;
  MIRRA_ASSIGN_OR_RETURN(auto setup,
                         examples::build_classifier_training(options.model, examples::benchmark_optimizer(), options.seed));
  const std::string dir = options.data_dir.empty() ? runtime::data::kFashionMnistDir : options.data_dir;
  const runtime::training::TrainingGraph signature = setup.training_graph();
  const runtime::data::ClassifierFeeds feeds{.images = signature.features, .labels = signature.labels};
  MIRRA_ASSIGN_OR_RETURN(const runtime::data::Dataset train,
                         runtime::data::fashion_mnist_dataset(dir, Split::train, {.batch_size = 128, .seed = options.seed}, feeds));
  MIRRA_ASSIGN_OR_RETURN(const runtime::data::Dataset test,
                         runtime::data::fashion_mnist_dataset(dir, Split::test, {.batch_size = 128, .shuffle = false}, feeds));
  runtime::Session session(setup.graph, ops::kernels(), {.threads = options.threads});
  nlohmann::json epochs = nlohmann::json::array();
  double seconds = 0;
  runtime::training::Trainer trainer(
      session, setup.training_graph(),
      {.epochs = options.max_epochs,
       .stop_at_accuracy = options.target,
       .on_epoch = [&](const runtime::training::EpochMetrics& m) {
         seconds += m.seconds;
         epochs.push_back({{"epoch", m.epoch + 1},
                           {"train_loss", m.mean_loss},
                           {"train_accuracy", m.accuracy.value_or(0.0)},
                           {"test_accuracy", m.evaluation->accuracy.value_or(0.0)},
                           {"examples_per_s", m.examples_per_second},
                           {"training_seconds_so_far", seconds}});
         std::fprintf(stderr, "epoch %lld: test accuracy %.4f, %.0f examples/s\n", static_cast<long long>(m.epoch + 1),
                      m.evaluation->accuracy.value_or(0.0), m.examples_per_second);
       }});
  MIRRA_ASSIGN_OR_RETURN(const auto history, trainer.fit(train, &test));
  const double reached = history.back().evaluation->accuracy.value_or(0.0);  // a classifier's
  return nlohmann::json{{"benchmark", "time to accuracy"},
                        {"model", options.model},
                        {"target", options.target},
                        {"reached", reached >= options.target},
                        {"epochs", history.size()},
                        {"training_seconds", seconds},
                        {"final_test_accuracy", reached},
                        {"threads", options.threads},
                        {"per_epoch", epochs}};
}

}  // namespace mirra::bench
