// Checkpoints: every variable of one replica under its strategy-free name, and the training position
// (step, epoch and batch of the next step, shuffle seed), so that training resumes exactly where it
// stopped, under any strategy and replica count. CheckpointStore keeps them in one directory as
// ckpt-<step>.mirrackpt, written atomically, the newest K kept; loading walks back from the newest
// past torn or corrupted files (each skipped with a warning) to the newest good one.
//
//   serialization::CheckpointStore store("ckpts", /*keep=*/3);
//   MIRRA_RETURN_IF_ERROR(store.save(checkpoint));
//   MIRRA_ASSIGN_OR_RETURN(auto latest, store.load_latest(warnings));  // nullopt: none yet
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "graph/status.h"
#include "serialization/tensor_codec.h"

namespace mirra::serialization {

struct TrainingPosition {
  int64_t step = 0;            // steps taken
  int64_t epoch = 0;           // epoch of the next step
  int64_t batch_in_epoch = 0;  // batch of that epoch the next step trains on
  uint64_t data_seed = 0;
  int64_t batch_size = 0;      // the global batch the position counts in
  friend bool operator==(const TrainingPosition&, const TrainingPosition&) = default;
};

struct Checkpoint {
  TrainingPosition position;
  std::vector<NamedTensor> variables;
  std::string strategy;  // what saved it, for messages
  int replicas = 1;
  std::string created;   // filled when empty
};

graph::Expected<flatbuffers::DetachedBuffer> serialize_checkpoint(const Checkpoint& checkpoint);
// Verified like a model file: framing, version, every tensor's bounds, size and checksum.
graph::Expected<Checkpoint> parse_checkpoint(std::span<const uint8_t> bytes, std::string_view source);

class CheckpointStore {
 public:
  // `keep` >= 1: how many of the newest checkpoints stay after each save.
  CheckpointStore(std::string directory, int keep);

  // Writes ckpt-<step>.mirrackpt atomically (creating the directory), then deletes the oldest
  // beyond `keep` and leftovers of interrupted writes.
  graph::Status save(const Checkpoint& checkpoint) const;
  // The newest checkpoint that loads; each newer one that does not adds a line to `warnings`.
  // nullopt when the directory holds none.
  graph::Expected<std::optional<Checkpoint>> load_latest(std::vector<std::string>& warnings) const;
  // Paths of the checkpoints present, oldest first.
  std::vector<std::string> list() const;

  const std::string& directory() const { return directory_; }

 private:
  std::string directory_;
  int keep_;
};

}  // namespace mirra::serialization
