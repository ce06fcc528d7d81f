// Checkpoint encoding (serialization/checkpoint.fbs) and the directory of the newest K.
#include "serialization/checkpoint.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "serialization/checkpoint_generated.h"
#include "serialization/file_io.h"
#include "serialization/limits.h"
#include "serialization/model_file.h"

namespace mirra::serialization {

namespace {

namespace fs = std::filesystem;

constexpr std::string_view kPrefix = "ckpt-";
constexpr std::string_view kSuffix = ".mirrackpt";

// The step in a checkpoint file name, or nullopt for other files.
std::optional<int64_t> step_of(const std::string& filename) {
  if (!filename.starts_with(kPrefix) || !filename.ends_with(kSuffix)) return std::nullopt;
  const std::string digits = filename.substr(kPrefix.size(), filename.size() - kPrefix.size() - kSuffix.size());
  if (digits.empty() || digits.size() > 18 || !std::all_of(digits.begin(), digits.end(), ::isdigit)) return std::nullopt;
  return std::stoll(digits);
}

}  // namespace

graph::Expected<flatbuffers::DetachedBuffer> serialize_checkpoint(const Checkpoint& checkpoint) {
  flatbuffers::FlatBufferBuilder fbb(encoded_size_hint(checkpoint.variables) + (1 << 12));
  fbb.ForceDefaults(true);
  const auto variables = write_tensors(fbb, checkpoint.variables);
  const TrainingPosition& p = checkpoint.position;
  const auto position = fb::CreateTrainingPosition(fbb, p.step, p.epoch, p.batch_in_epoch, p.data_seed, p.batch_size);
  fb::FinishCheckpointBuffer(
      fbb, fb::CreateCheckpoint(fbb, kCheckpointFormatVersion, position, variables, fbb.CreateString(checkpoint.strategy),
                                checkpoint.replicas,
                                fbb.CreateString(checkpoint.created.empty() ? utc_timestamp() : checkpoint.created)));
  return fbb.Release();
}

graph::Expected<Checkpoint> parse_checkpoint(std::span<const uint8_t> bytes, std::string_view source) {
  auto error = [&](const std::string& message) { return graph::invalid_argument(std::string(source) + ": " + message); };
  if (bytes.size() < 8 || !fb::CheckpointBufferHasIdentifier(bytes.data())) {
    return error("not a mirra checkpoint (no \"MRCK\" identifier)");
  }
  AlignedBytes copy;
  bytes = aligned_view(bytes, copy);
  flatbuffers::Verifier verifier(bytes.data(), bytes.size(), 64, 4'000'000);
  if (!fb::VerifyCheckpointBuffer(verifier)) return error("corrupted or truncated (the FlatBuffers verifier rejects it)");
  const fb::Checkpoint& in = *fb::GetCheckpoint(bytes.data());
  if (in.format_version() != kCheckpointFormatVersion) {
    return error("format version " + std::to_string(in.format_version()) + " is not supported (this build reads " +
                 std::to_string(kCheckpointFormatVersion) + ")");
  }
  Checkpoint out;
  const fb::TrainingPosition& p = *in.position();
  out.position = {p.step(), p.epoch(), p.batch_in_epoch(), p.data_seed(), p.batch_size()};
  if (p.step() < 0 || p.epoch() < 0 || p.batch_in_epoch() < 0 || p.batch_size() < 0) {
    return error("negative training position");
  }
  MIRRA_ASSIGN_OR_RETURN(out.variables, read_tensors(in.variables(), std::string(source) + ": variables"));
  out.strategy = in.strategy() ? in.strategy()->str() : "";
  out.replicas = in.replicas();
  out.created = in.created() ? in.created()->str() : "";
  return out;
}

CheckpointStore::CheckpointStore(std::string directory, int keep) : directory_(std::move(directory)), keep_(std::max(keep, 1)) {}

std::vector<std::string> CheckpointStore::list() const {
  std::vector<std::pair<int64_t, std::string>> found;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(directory_, ec)) {
    if (const auto step = step_of(entry.path().filename().string())) found.emplace_back(*step, entry.path().string());
  }
  std::sort(found.begin(), found.end());
  std::vector<std::string> paths;
  for (auto& f : found) paths.push_back(std::move(f.second));
  return paths;
}

graph::Status CheckpointStore::save(const Checkpoint& checkpoint) const {
  std::error_code ec;
  fs::create_directories(directory_, ec);
  if (ec) return graph::invalid_argument("cannot create checkpoint directory '" + directory_ + "': " + ec.message());
  MIRRA_ASSIGN_OR_RETURN(const flatbuffers::DetachedBuffer bytes, serialize_checkpoint(checkpoint));
  char name[64];
  std::snprintf(name, sizeof name, "ckpt-%010lld.mirrackpt", static_cast<long long>(checkpoint.position.step));
  MIRRA_RETURN_IF_ERROR(write_file_atomically((fs::path(directory_) / name).string(), {bytes.data(), bytes.size()}));
  std::vector<std::string> paths = list();
  for (size_t i = 0; i + static_cast<size_t>(keep_) < paths.size(); ++i) fs::remove(paths[i], ec);
  for (const auto& entry : fs::directory_iterator(directory_, ec)) {  // temporaries of killed writers
    const std::string filename = entry.path().filename().string();
    if (filename.starts_with(".ckpt-") && filename.find(".tmp-") != std::string::npos) fs::remove(entry.path(), ec);
  }
  return graph::Status();
}

graph::Expected<std::optional<Checkpoint>> CheckpointStore::load_latest(std::vector<std::string>& warnings) const {
  const std::vector<std::string> paths = list();
  for (auto it = paths.rbegin(); it != paths.rend(); ++it) {
    auto bytes = read_file(*it, "checkpoint");
    auto checkpoint = bytes.ok() ? parse_checkpoint(bytes->span(), "checkpoint '" + *it + "'")
                                 : graph::Expected<Checkpoint>(bytes.status());
    if (checkpoint.ok()) return std::optional<Checkpoint>(std::move(*checkpoint));
    warnings.push_back(checkpoint.status().message() + "; trying an older checkpoint");
  }
  if (!paths.empty()) {
    return graph::invalid_argument("no checkpoint in '" + directory_ + "' is readable (" + std::to_string(paths.size()) +
                                   " tried)");
  }
  return std::optional<Checkpoint>();
}

}  // namespace mirra::serialization
