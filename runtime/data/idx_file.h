// IDX files (the MNIST family's format), gzipped or not: a big-endian header (two zero bytes, an
// element type, a rank, one 32-bit size per dim) and then the elements. Only unsigned bytes (type
// 0x08) are read, which is what Fashion-MNIST holds. Every field is checked before it is used: a
// malformed, truncated or oversized file is an error naming the file and what is wrong, never a crash.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "graph/status.h"
#include "runtime/data/example_source.h"

namespace mirra::runtime::data {

struct IdxArray {
  std::vector<int64_t> dims;
  std::vector<uint8_t> values;  // row-major, prod(dims) of them
};

inline constexpr size_t kMaxIdxBytes = size_t{1} << 30;  // decompressed; larger files are refused

// Parses the bytes of an IDX file; `name` is used in error messages.
graph::Expected<IdxArray> parse_idx(std::span<const uint8_t> bytes, std::string_view name);
// Reads and parses `path`; gzip is detected from its magic bytes.
graph::Expected<IdxArray> read_idx_file(const std::string& path);
// The array as the field `name` of a data set: u8 values shaped as its dims after the first, which
// counts the examples.
ArrayField idx_field(std::string name, IdxArray array);

}  // namespace mirra::runtime::data
