// Writes the fuzzers' seed corpus: valid model files (tiny ones, so mutations reach every field),
// a checkpoint, and run configs for each strategy with every key.
//   write_seed_corpus MODEL_DIR CONFIG_DIR
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "serialization/checkpoint.h"
#include "tests/serialization/tiny_model.h"
#include "tools/mirra/run_config.h"

int main(int argc, char** argv) {
  using namespace mirra;
  if (argc != 3) {
    std::fprintf(stderr, "usage: write_seed_corpus MODEL_DIR CONFIG_DIR\n");
    return 2;
  }
  const std::filesystem::path models(argv[1]), configs(argv[2]);
  std::filesystem::create_directories(models);
  std::filesystem::create_directories(configs);
  for (const auto& [name, model] : {std::pair{"tiny_mlp.mirra", testing::tiny_model()},
                                    std::pair{"tiny_cnn.mirra", testing::tiny_cnn_model()},
                                    std::pair{"tiny_sized.mirra", testing::tiny_sized_model()}}) {
    if (!serialization::save_model(model, (models / name).string()).ok()) return 1;
  }
  serialization::Checkpoint checkpoint{.position = {.step = 3, .epoch = 1, .batch_in_epoch = 2, .data_seed = 9},
                                       .variables = testing::tiny_model().weights,
                                       .strategy = "mirrored",
                                       .replicas = 2};
  auto bytes = serialization::serialize_checkpoint(checkpoint);
  if (!bytes.ok()) return 1;
  std::ofstream(models / "tiny.mirrackpt", std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes->data()), static_cast<std::streamsize>(bytes->size()));
  for (const char* strategy : {"one_device", "mirrored", "central_storage"}) {
    runner::RunConfig config = runner::default_run_config();
    config.strategy.strategy = strategy;
    config.strategy.devices = strategies::default_devices(strategy);
    config.training.learning_rate = 0.05;
    config.checkpoint.dir = "ckpts";
    std::ofstream(configs / (std::string(strategy) + ".json")) << runner::run_config_json(config);
  }
  return 0;
}
