// Writes the fuzzers' seed corpus: valid model files (tiny ones, so mutations reach every field),
// a checkpoint, run configs for each strategy with every key (a data set's among them), and data
// files (an .npy, an .npz, a CSV file and TensorFlow's TFRecord file, each behind the byte that
// picks its reader in data_file_fuzzer), and deliveries a parameter-server task receives (a value of
// each dtype, an empty one, a scalar).
//   write_seed_corpus MODEL_DIR CONFIG_DIR DATA_DIR TRANSFER_DIR
#include <cstdio>
#include <filesystem>
#include <fstream>

#include <iterator>
#include <span>
#include <string>
#include <vector>

#include "runtime/data/numpy_file.h"
#include "serialization/checkpoint.h"
#include "tests/protobuf_wire.h"
#include "tests/serialization/tiny_model.h"
#include "tools/mirra/run_config.h"

int main(int argc, char** argv) {
  using namespace mirra;
  if (argc != 5) {
    std::fprintf(stderr, "usage: write_seed_corpus MODEL_DIR CONFIG_DIR DATA_DIR TRANSFER_DIR\n");
    return 2;
  }
  const std::filesystem::path models(argv[1]), configs(argv[2]), data(argv[3]), transfers(argv[4]);
  for (const auto& dir : {models, configs, data, transfers}) std::filesystem::create_directories(dir);
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
    config.data.train = runner::DataSpec{.format = "numpy",
                                         .files = {"train.npz"},
                                         .fields = {{"images", {.field = "x", .scale = 0.5, .mean = {0.25}, .stddev = {2}}},
                                                    {"labels", {.field = "y", .one_hot = 10}}}};
    config.data.threads = 2;
    config.data.shuffle_buffer = 64;
    config.data.shard = runtime::data::ShardPolicy::automatic;
    std::ofstream(configs / (std::string(strategy) + ".json")) << runner::run_config_json(config);
  }
  const std::vector<float> values = {1.5f, -2, 0.25f, 8, 3, -1};
  const runtime::data::NumpyValues array{.type = runtime::data::ElementType::f32, .shape = {3, 2},
                                         .data = std::as_bytes(std::span(values))};
  const std::filesystem::path npy = data / "array.npy.raw", npz = data / "arrays.npz.raw";
  if (!runtime::data::write_npy(npy.string(), array).ok() || !runtime::data::write_npz(npz.string(), {{"x", array}}).ok()) return 1;
  // The picking byte first: 0 for the .npy reader, 1 for the .npz one, 2 for CSV, 3 for TFRecord.
  for (const auto& [file, reader] : {std::pair{npy, '\0'}, std::pair{npz, '\1'}}) {
    std::ifstream in(file, std::ios::binary);
    const std::string contents((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::ofstream(data / file.stem(), std::ios::binary) << reader << contents;
    std::filesystem::remove(file);
  }
  std::ofstream(data / "table.csv", std::ios::binary) << '\2' << "x1,x2,\"y, m\"\n1,2.5,3\n-4,5e3,\"6\"\n";
  // TensorFlow's records (every feature kind, PNG and JPEG images among them), behind byte 3.
  std::ifstream records(MIRRA_SOURCE_DIR "/tests/runtime/tfrecord_reference/every_kind.tfrecord", std::ios::binary);
  std::ofstream(data / "records.tfrecord", std::ios::binary) << '\3' << records.rdbuf();
  // The same records GZIP-compressed, read as a stream, behind byte 4.
  std::ifstream compressed(MIRRA_SOURCE_DIR "/tests/runtime/tfrecord_reference/every_kind.tfrecord.gz", std::ios::binary);
  std::ofstream(data / "records.tfrecord.gz", std::ios::binary) << '\4' << compressed.rdbuf();
  // Deliveries of [2, 3] values of each dtype (instance = dtype), an empty [0, 4] and a scalar, each
  // waiting a millisecond for its Recv.
  for (int dtype = 0; dtype <= static_cast<int>(graph::DType::f16); ++dtype) {
    const size_t bytes = 6 * graph::dtype_size(static_cast<graph::DType>(dtype));
    std::ofstream(transfers / ("dtype_" + std::to_string(dtype)), std::ios::binary)
        << test::delivery("", "", test::number_field(6, dtype) + test::number_field(7, dtype) + test::number_field(8, 2) +
                                      test::number_field(8, 3) + test::bytes_field(9, std::string(bytes, '\x11')) +
                                      test::number_field(10, 1));
  }
  std::ofstream(transfers / "empty", std::ios::binary)
      << test::delivery("", "", test::number_field(6, 100) + test::number_field(8, 0) + test::number_field(8, 4) + test::number_field(10, 1));
  std::ofstream(transfers / "scalar", std::ios::binary)
      << test::delivery("", "", test::number_field(6, 101) + test::bytes_field(9, std::string(4, '\0')) + test::number_field(10, 1));
  return 0;
}
