// mirra-examples: writes the example models as model files for the runner.
//   mirra-examples list                 names the examples
//   mirra-examples write NAME OUT.mirra writes one (weights initialised from --seed; --label-smoothing;
//                                       linear's --features and --outputs; bigram's --vocab and --context;
//                                       embedding_bag's --vocab (rows), --embedding (width), --context (ids);
//                                       the GPTs' --layers, --heads, --embedding, --context, --vocab, --dropout;
//                                       the ResNets' --dtype f32|f64)
// Exit codes: 0 success, 2 bad input, 1 internal failure.
#include <CLI/CLI.hpp>

#include <cstdio>

#include "examples/example_models.h"

int main(int argc, char** argv) {
  CLI::App app{"mirra-examples: the example models as mirra model files"};
  app.require_subcommand(1);
  auto* list = app.add_subcommand("list", "Name the example models");
  auto* write = app.add_subcommand("write", "Write an example model to a file");
  std::string name, out;
  uint64_t seed = 1;
  write->add_option("NAME", name, "Example model (see list)")->required();
  write->add_option("OUT", out, "Model file to write (.mirra)")->required();
  write->add_option("--seed", seed, "Seed of the initial weights");
  mirra::examples::ExampleModelOptions options;
  std::string dtype_name = "f32";
  write->add_option("--label-smoothing", options.label_smoothing,
                    "Cross-entropy against (1 - s) * one-hot + s / classes (TensorFlow's label_smoothing; default 0)")
      ->check(CLI::Range(0.0, 1.0));
  write->add_option("--features", options.features, "linear: inputs per example (default 8)")->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  write->add_option("--outputs", options.outputs, "linear: targets per example (default 1)")->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  write->add_option("--vocab", options.vocab, "bigram, gpt: tokens in the vocabulary (bigram: 256; gpt: the preset's); embedding_bag: the table's rows (1,000,000)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 24));
  write->add_option("--context", options.context, "bigram, gpt: tokens per window (bigram: 64; gpt: the preset's); embedding_bag: ids per example (8)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  write->add_option("--layers", options.layers, "gpt: transformer blocks")->check(CLI::Range(int64_t{1}, int64_t{1} << 10));
  write->add_option("--heads", options.heads, "gpt: attention heads (dividing the embedding)")->check(CLI::Range(int64_t{1}, int64_t{1} << 10));
  write->add_option("--dropout", options.dropout, "gpt: dropout rate, keyed by example (default 0)")->check(CLI::Range(0.0, 0.999));
  write->add_option("--dtype", dtype_name, "resnet20, resnet18, resnet50, resnet101: f32 (default) or f64")
      ->check(CLI::IsMember({"f32", "f64"}));
  write->add_option("--embedding", options.embedding, "gpt: width of the residual stream; embedding_bag: the table's width (64)")->check(CLI::Range(int64_t{1}, int64_t{1} << 16));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  if (list->parsed()) {
    for (const auto& m : mirra::examples::example_models()) std::printf("%-10s %s\n", m.name.c_str(), m.description.c_str());
    return 0;
  }
  options.dtype = dtype_name == "f64" ? mirra::graph::DType::f64 : mirra::graph::DType::f32;
  auto model = mirra::examples::build_example_model(name, seed, options);
  if (!model.ok()) {
    std::fprintf(stderr, "mirra-examples: %s\n", model.status().message().c_str());
    return mirra::graph::blames_input(model.status().code()) ? 2 : 1;
  }
  if (auto status = mirra::serialization::save_model(*model, out); !status.ok()) {
    std::fprintf(stderr, "mirra-examples: %s\n", status.message().c_str());
    return 2;
  }
  std::printf("wrote %s (%s)\n", out.c_str(), name.c_str());
  return 0;
}
