// Whole-file reads into 64-byte-aligned memory (bounded by kMaxFileBytes before anything is
// allocated) and atomic writes: a temporary file in the same directory, fsync, rename over the
// target, fsync of the directory, so a reader sees the old file or the new one, never a torn one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "graph/status.h"

namespace mirra::serialization {

class AlignedBytes {
 public:
  AlignedBytes() = default;
  explicit AlignedBytes(size_t size);
  explicit AlignedBytes(std::span<const uint8_t> bytes);

  uint8_t* data() { return data_.get(); }
  const uint8_t* data() const { return data_.get(); }
  size_t size() const { return size_; }
  std::span<const uint8_t> span() const { return {data_.get(), size_}; }

 private:
  struct Free {
    void operator()(uint8_t* p) const { ::operator delete[](p, std::align_val_t{64}); }
  };
  std::unique_ptr<uint8_t[], Free> data_;
  size_t size_ = 0;
};

// `bytes` itself when it starts on a 64-byte boundary (what the FlatBuffers verifier and readers need
// for the file's own alignment), else a copy held in `storage`.
std::span<const uint8_t> aligned_view(std::span<const uint8_t> bytes, AlignedBytes& storage);

// `what` names the file's kind in errors ("model file"). Only a regular file is read: the type is
// checked without blocking, so a FIFO or a device is an error, not a hang.
graph::Expected<AlignedBytes> read_file(const std::string& path, std::string_view what);
// A whole text file (a config, a cluster description, a trace) as read_file reads it.
graph::Expected<std::string> read_text_file(const std::string& path, std::string_view what);

// Note [Write targets]
// Files are written only as regular files. A symlink is followed (hop by hop, at most 40), and the
// file it names is replaced; an existing target that is anything else (a device, a FIFO, a
// directory) is refused, so that no write replaces /dev/null or feeds a pipe with a torn file.
graph::Expected<std::string> resolve_write_target(const std::string& path, std::string_view what);
graph::Status write_file_atomically(const std::string& path, std::span<const uint8_t> bytes);
// Checks before long work that `path` (empty: nothing to check) can be written as write_file_atomically
// would: a resolvable target in a directory where a file can be created.
graph::Status check_writable_file(const std::string& path, std::string_view what);
// Creates and removes a file in `dir`: the only check that also holds for root and read-only mounts.
graph::Status check_writable_directory(const std::string& dir, std::string_view what);

}  // namespace mirra::serialization
