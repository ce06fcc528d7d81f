// GzipReader: a GZIP file inflated as it is read, a chunk at a time, so that a file larger than memory
// streams (every member, as gzip concatenates them). Errors name the file: one that is not GZIP, damaged
// or truncated.
//
//   auto file = GzipReader::open("train.tfrecord.gz", "TFRecord file 'train.tfrecord.gz'");
//   std::vector<std::byte> chunk(1 << 20);
//   while (size_t n = *(*file)->read(chunk)) use(std::span(chunk).first(n));
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "graph/status.h"

namespace mirra::runtime::data {

class GzipReader {
 public:
  static graph::Expected<std::unique_ptr<GzipReader>> open(const std::string& path, std::string name);
  ~GzipReader();
  GzipReader(const GzipReader&) = delete;
  GzipReader& operator=(const GzipReader&) = delete;

  // Fills `out` with the next inflated bytes: all of it, or fewer only at the end of the file (0 there).
  graph::Expected<size_t> read(std::span<std::byte> out);
  // Inflated bytes read so far.
  uint64_t position() const { return position_; }
  const std::string& name() const { return name_; }

 private:
  struct State;
  explicit GzipReader(std::string name);
  // Input for zlib: false at the end of the file.
  graph::Expected<bool> fill();

  std::string name_;
  std::unique_ptr<State> state_;
  uint64_t position_ = 0;
  bool ended_ = false;
};

}  // namespace mirra::runtime::data
