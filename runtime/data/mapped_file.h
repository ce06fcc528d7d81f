// MappedFile: a file's bytes mapped read-only into memory, so that a data set larger than memory is
// paged in as batches read it. Shared: arrays that view the mapping keep it alive.
//
//   auto file = MappedFile::open("train.npy");   // an error names the path and the reason
//   std::span<const std::byte> bytes = (*file)->bytes();
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <string>

#include "graph/status.h"

namespace mirra::runtime::data {

class MappedFile {
 public:
  static graph::Expected<std::shared_ptr<const MappedFile>> open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  std::span<const std::byte> bytes() const { return {data_, size_}; }
  const std::string& path() const { return path_; }

 private:
  MappedFile() = default;

  std::string path_;
  const std::byte* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace mirra::runtime::data
