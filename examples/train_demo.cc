// mirra-train: trains a benchmark model (the MLP or the CNN) on Fashion-MNIST with the C++ API, a
// distribution strategy chosen by config (default: Mirrored over the local devices) and the library's
// Trainer: a progress line per epoch (loss, accuracy, examples/s), then the test accuracy. The
// defaults are the benchmark settings (SGD, momentum 0.9, lr 0.05, global batch 128).
// With --target-accuracy it stops at the first epoch that reaches it and says how long that took.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <fstream>

#include "examples/classifier_training.h"
#include "graph/print.h"
#include "ops/ops.h"
#include "runtime/data/fashion_mnist.h"
#include "strategies/config.h"

using namespace mirra;

namespace {

struct Flags {
  std::string model = "mlp";
  std::string data_dir = runtime::data::kFashionMnistDir;
  std::string strategy = "mirrored";
  std::string strategy_config;
  std::string dump_graph;
  int64_t epochs = 3;
  int64_t max_steps = 0;
  int64_t batch_size = 128;
  double learning_rate = 0.05;
  double target_accuracy = 0;
  int threads = 0;
  uint64_t seed = 1;
};

int fail(const graph::Status& status) {
  std::fprintf(stderr, "mirra-train: %s\n", status.to_string().c_str());
  return 1;
}

int run(const Flags& flags) {
  using runtime::data::Split;
  ops::Optimizer optimizer = examples::benchmark_optimizer();
  optimizer.learning_rate = flags.learning_rate;
  auto setup = examples::build_classifier_training(flags.model, optimizer, flags.seed);
  if (!setup.ok()) return fail(setup.status());
  auto train = runtime::data::fashion_mnist_dataset(flags.data_dir, Split::train,
                                                    {.batch_size = flags.batch_size, .seed = flags.seed});
  if (!train.ok()) return fail(train.status());
  auto test = runtime::data::fashion_mnist_dataset(flags.data_dir, Split::test,
                                                   {.batch_size = flags.batch_size, .shuffle = false});
  if (!test.ok()) return fail(test.status());

  auto config = flags.strategy_config.empty()
                    ? graph::Expected<strategies::StrategyConfig>(strategies::StrategyConfig{.strategy = flags.strategy})
                    : strategies::load_strategy_config(flags.strategy_config);
  if (!config.ok()) return fail(config.status());
  auto strategy = strategies::make_strategy(*config);
  if (!strategy.ok()) return fail(strategy.status());
  auto distributed = (*strategy)->distribute(setup->program());
  if (!distributed.ok()) return fail(distributed.status());

  if (!flags.dump_graph.empty()) {
    std::ofstream(flags.dump_graph + ".txt") << graph::to_text(distributed->graph);
    std::ofstream(flags.dump_graph + ".dot") << graph::to_dot(distributed->graph);
    std::printf("wrote the distributed graph to %s.txt and %s.dot\n", flags.dump_graph.c_str(), flags.dump_graph.c_str());
  }
  runtime::Session session(distributed->graph, ops::cpu_kernels(), {.threads = flags.threads});
  std::printf("Training the %s on Fashion-MNIST (%lld train, %lld test images), strategy %s, global batch %lld, "
              "optimizer %s, learning rate %.3g\n",
              flags.model.c_str(), static_cast<long long>(train->size()), static_cast<long long>(test->size()),
              (*strategy)->describe().c_str(), static_cast<long long>(flags.batch_size), optimizer.kind.c_str(),
              optimizer.learning_rate);
  runtime::training::Trainer trainer(
      session, distributed->signature,
      {.epochs = flags.epochs,
       .max_steps = flags.max_steps,
       .stop_at_accuracy = flags.target_accuracy,
       .on_epoch = [](const runtime::training::EpochMetrics& m) {
         std::printf("epoch %lld: %lld steps, loss %.4f, accuracy %.4f, %.0f examples/s, test accuracy %.4f\n",
                     static_cast<long long>(m.epoch + 1), static_cast<long long>(m.steps), m.mean_loss, m.accuracy,
                     m.examples_per_second, m.evaluation ? m.evaluation->accuracy : 0.0);
         std::fflush(stdout);
       }});
  auto history = trainer.fit(*train, &*test);
  if (!history.ok()) return fail(history.status());
  if (history->empty()) return fail(graph::invalid_argument("no epoch ran"));
  const auto& last = history->back();
  double seconds = 0;
  for (const auto& m : *history) seconds += m.seconds;
  std::printf("test accuracy %.4f, test loss %.4f after %zu epochs (%lld steps, %.1f s training)\n",
              last.evaluation->accuracy, last.evaluation->mean_loss, history->size(),
              static_cast<long long>(trainer.steps_taken()), seconds);
  if (flags.target_accuracy > 0 && last.evaluation->accuracy < flags.target_accuracy) {
    std::printf("target accuracy %.4f not reached\n", flags.target_accuracy);
    return 3;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Trains a benchmark model on Fashion-MNIST on one device"};
  Flags flags;
  app.add_option("--model", flags.model, "mlp or cnn")->check(CLI::IsMember({"mlp", "cnn"}));
  app.add_option("--data", flags.data_dir, "Directory with the Fashion-MNIST IDX files");
  app.add_option("--strategy", flags.strategy, "one_device, mirrored or central_storage (default devices)")
      ->check(CLI::IsMember({"one_device", "mirrored", "central_storage"}));
  app.add_option("--strategy-config", flags.strategy_config, "A strategy config file (JSON, see docs/config.md)");
  app.add_option("--dump-graph", flags.dump_graph, "Write the distributed graph as PREFIX.txt and PREFIX.dot");
  app.add_option("--epochs", flags.epochs, "Epochs to train")->check(CLI::Range(int64_t{1}, int64_t{1000}));
  app.add_option("--max-steps", flags.max_steps, "Stop after this many steps (0: no limit)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40));
  app.add_option("--batch-size", flags.batch_size, "Global batch size")->check(CLI::Range(int64_t{1}, int64_t{65536}));
  app.add_option("--learning-rate", flags.learning_rate, "SGD-momentum learning rate")
      ->check(CLI::Range(1e-9, 100.0));
  app.add_option("--target-accuracy", flags.target_accuracy,
                 "Stop after the first epoch reaching this test accuracy (exit 3 if none does)")
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--threads", flags.threads, "oneTBB threads (0: all cores)")->check(CLI::Range(0, 1024));
  app.add_option("--seed", flags.seed, "Seed for initial weights and shuffling");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  return run(flags);
}
