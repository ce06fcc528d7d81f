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

// `what` names the file's kind in errors ("model file").
graph::Expected<AlignedBytes> read_file(const std::string& path, std::string_view what);
graph::Status write_file_atomically(const std::string& path, std::span<const uint8_t> bytes);

}  // namespace mirra::serialization
