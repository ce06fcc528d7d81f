// run_file_io: best-of-N timings of mirra's save/load and raw write/read of the same byte count.
#include "bench/file_io.h"

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>

#include "examples/example_models.h"
#include "graph/check.h"
#include "ops/registry.h"
#include "serialization/checkpoint.h"
#include "serialization/model_file.h"

namespace mirra::bench {

namespace {

double best_seconds(int repetitions, const std::function<void()>& body) {
  double best = 1e300;
  for (int r = 0; r < repetitions; ++r) {
    const auto start = std::chrono::steady_clock::now();
    body();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return best;
}

// The peer: the bytes written durably and atomically with plain POSIX calls, then read back.
void raw_write(const std::string& path, const std::vector<uint8_t>& bytes) {
  const std::string temporary = path + ".tmp";
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  MIRRA_CHECK(fd >= 0 && ::write(fd, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size()) && ::fsync(fd) == 0);
  ::close(fd);
  MIRRA_CHECK(::rename(temporary.c_str(), path.c_str()) == 0);
}

void raw_read(const std::string& path, std::vector<uint8_t>& bytes) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  MIRRA_CHECK(fd >= 0 && ::read(fd, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size()));
  ::close(fd);
}

nlohmann::json compare(const char* what, size_t bytes, double save, double raw_save, double load, double raw_load) {
  const double mb = static_cast<double>(bytes) / 1e6;
  return {{"file", what},
          {"bytes", bytes},
          {"save_s", save},
          {"save_MBps", mb / save},
          {"peer_write_fsync_s", raw_save},
          {"save_vs_peer", save / raw_save},
          {"load_s", load},
          {"load_MBps", mb / load},
          {"peer_read_s", raw_load},
          {"load_vs_peer", load / raw_load}};
}

}  // namespace

nlohmann::json run_file_io(const FileIoOptions& options) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(options.directory) / ("mirra_bench_files_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  auto model = examples::build_example_model("cnn", 1);
  MIRRA_CHECK(model.ok(), model.status().message());
  const std::string model_path = (dir / "cnn.mirra").string();
  const std::string raw_path = (dir / "raw.bin").string();
  nlohmann::json results = nlohmann::json::array();

  const double save = best_seconds(options.repetitions, [&] { MIRRA_CHECK(serialization::save_model(*model, model_path).ok()); });
  const double load = best_seconds(options.repetitions, [&] {
    MIRRA_CHECK(serialization::load_model(model_path, ops::registry()).ok());
  });
  std::vector<uint8_t> bytes(fs::file_size(model_path), 1);
  const double raw_save = best_seconds(options.repetitions, [&] { raw_write(raw_path, bytes); });
  const double raw_load = best_seconds(options.repetitions, [&] { raw_read(raw_path, bytes); });
  results.push_back(compare("cnn model file", bytes.size(), save, raw_save, load, raw_load));

  serialization::Checkpoint checkpoint{.position = {.step = 1000, .epoch = 2, .batch_in_epoch = 62, .data_seed = 1},
                                       .variables = model->weights,
                                       .strategy = "mirrored",
                                       .replicas = 2};
  for (const auto& w : model->weights) checkpoint.variables.push_back({w.name + "/momentum", w.value});
  const serialization::CheckpointStore store((dir / "ckpt").string(), 1);
  const double ckpt_save = best_seconds(options.repetitions, [&] { MIRRA_CHECK(store.save(checkpoint).ok()); });
  std::vector<std::string> warnings;
  const double ckpt_load = best_seconds(options.repetitions, [&] { MIRRA_CHECK(store.load_latest(warnings).ok()); });
  bytes.assign(fs::file_size(store.list().back()), 1);
  const double ckpt_raw_save = best_seconds(options.repetitions, [&] { raw_write(raw_path, bytes); });
  const double ckpt_raw_load = best_seconds(options.repetitions, [&] { raw_read(raw_path, bytes); });
  results.push_back(compare("cnn checkpoint (weights + momentum)", bytes.size(), ckpt_save, ckpt_raw_save, ckpt_load, ckpt_raw_load));
  fs::remove_all(dir);
  return {{"benchmark", "file_io"}, {"repetitions", options.repetitions}, {"results", results}};
}

}  // namespace mirra::bench
