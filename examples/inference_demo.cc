// mirra-inference-demo: builds the MLP and the CNN with the C++ API and runs them over the
// Fashion-MNIST test set in batches (the last one partial), reporting parameters, throughput and
// accuracy. The weights are freshly initialised, so accuracy is near chance (0.1); training comes
// with the optimizers.
#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>

#include "examples/models.h"
#include "ops/ops.h"
#include "runtime/data/fashion_mnist.h"
#include "runtime/session.h"

using namespace mirra;

namespace {

int run(const std::string& data_dir, int64_t limit, int64_t batch_size, int threads) {
  auto test = runtime::data::load_fashion_mnist(data_dir, runtime::data::Split::test);
  if (!test.ok()) {
    std::fprintf(stderr, "mirra-inference-demo: %s\n", test.status().message().c_str());
    return 2;
  }
  const int64_t examples = std::min<int64_t>(limit, test->size());
  std::printf("Fashion-MNIST test set: %lld images from %s; batch %lld; %d threads\n",
              static_cast<long long>(examples), data_dir.c_str(), static_cast<long long>(batch_size), threads);
  for (const auto& [name, build] : {std::pair{"mlp", &examples::build_mlp}, std::pair{"cnn", &examples::build_cnn}}) {
    graph::Graph g;
    graph::Builder b(g, ops::registry(), /*seed=*/1);
    const examples::Classifier model = build(b);
    const auto predictions = ops::argmax(b, model.logits, 1);
    if (!b.status().ok()) {
      std::fprintf(stderr, "mirra-inference-demo: %s\n", b.status().to_string().c_str());
      return 1;
    }
    int64_t parameters = 0;
    for (const graph::Node& node : g.nodes()) {
      if (node.op == "Variable") parameters += *node.outputs[0].shape.num_elements();
    }
    runtime::Session session(g, ops::cpu_kernels(), {.threads = threads});
    int64_t correct = 0;
    const auto start = std::chrono::steady_clock::now();
    for (int64_t first = 0; first < examples; first += batch_size) {
      const int64_t count = std::min(batch_size, examples - first);
      std::vector<float> pixels(static_cast<size_t>(count * 784));
      for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = test->images.values[static_cast<size_t>(first) * 784 + i] / 255.0f;
      auto out = session.run({{"images", runtime::Tensor::from<float>({count, 28, 28, 1}, std::span<const float>(pixels))}},
                             {predictions});
      if (!out.ok()) {
        std::fprintf(stderr, "mirra-inference-demo: %s\n", out.status().to_string().c_str());
        return 1;
      }
      const auto predicted = (*out)[0].values<int64_t>();
      for (int64_t i = 0; i < count; ++i) correct += predicted[static_cast<size_t>(i)] == test->labels.values[static_cast<size_t>(first + i)];
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("%-4s %8lld parameters, %4zu nodes: %9.0f examples/s, accuracy %.4f (untrained)\n", name,
                static_cast<long long>(parameters), g.size(), static_cast<double>(examples) / seconds,
                static_cast<double>(correct) / static_cast<double>(examples));
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Runs the example models over the Fashion-MNIST test set"};
  std::string data_dir = runtime::data::kFashionMnistDir;
  int64_t limit = 10000, batch_size = 128;
  int threads = 2;
  app.add_option("--data", data_dir, "Directory with the Fashion-MNIST IDX files");
  app.add_option("--examples", limit, "How many test images to run")->check(CLI::Range(int64_t{1}, int64_t{10000}));
  app.add_option("--batch-size", batch_size, "Images per step")->check(CLI::Range(int64_t{1}, int64_t{65536}));
  app.add_option("--threads", threads, "oneTBB threads")->check(CLI::Range(1, 1024));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  return run(data_dir, limit, batch_size, threads);
}
