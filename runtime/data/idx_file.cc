// IDX parsing and (gzip-aware) file reading through zlib, and an IDX array as a field of a data set.
#include "runtime/data/idx_file.h"

#include <zlib.h>

#include <cstdio>
#include <memory>

namespace mirra::runtime::data {

namespace {

constexpr uint8_t kUnsignedByte = 0x08;
constexpr int kMaxRank = 4;

uint32_t read_big_endian(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

}  // namespace

graph::Expected<IdxArray> parse_idx(std::span<const uint8_t> bytes, std::string_view name) {
  const std::string where = "IDX file '" + std::string(name) + "'";
  if (bytes.size() < 4) return graph::invalid_argument(where + ": shorter than its 4-byte magic number");
  if (bytes[0] != 0 || bytes[1] != 0) return graph::invalid_argument(where + ": bad magic number (first two bytes must be 0)");
  if (bytes[2] != kUnsignedByte) {
    return graph::invalid_argument(where + ": element type 0x" + std::to_string(bytes[2]) +
                                   " is not supported (only unsigned bytes, 0x08)");
  }
  const int rank = bytes[3];
  if (rank < 1 || rank > kMaxRank) {
    return graph::invalid_argument(where + ": rank " + std::to_string(rank) + " is outside [1, " +
                                   std::to_string(kMaxRank) + "]");
  }
  const size_t header = 4 + 4 * static_cast<size_t>(rank);
  if (bytes.size() < header) return graph::invalid_argument(where + ": truncated in its header");
  IdxArray array;
  uint64_t count = 1;
  for (int d = 0; d < rank; ++d) {
    const uint32_t dim = read_big_endian(bytes.data() + 4 + 4 * d);
    if (dim > INT32_MAX) return graph::invalid_argument(where + ": dim " + std::to_string(d) + " is too large");
    if (__builtin_mul_overflow(count, uint64_t{dim}, &count) || count > kMaxIdxBytes) {
      return graph::invalid_argument(where + ": its dims describe more than " + std::to_string(kMaxIdxBytes) + " bytes");
    }
    array.dims.push_back(dim);
  }
  const size_t payload = bytes.size() - header;
  if (payload < count) {
    return graph::invalid_argument(where + ": truncated: its header promises " + std::to_string(count) +
                                   " bytes of data, the file has " + std::to_string(payload));
  }
  if (payload > count) {
    return graph::invalid_argument(where + ": " + std::to_string(payload - count) + " unexpected bytes after the data");
  }
  array.values.assign(bytes.begin() + static_cast<ptrdiff_t>(header), bytes.end());
  return array;
}

graph::Expected<IdxArray> read_idx_file(const std::string& path) {
  // gzread reads plain files too, so one path serves both.
  std::unique_ptr<gzFile_s, int (*)(gzFile)> file(gzopen(path.c_str(), "rb"), gzclose);
  if (!file) return graph::not_found("IDX file '" + path + "': cannot open it");
  std::vector<uint8_t> bytes;
  uint8_t chunk[1 << 16];
  for (;;) {
    const int got = gzread(file.get(), chunk, sizeof(chunk));
    if (got < 0) {
      int code = 0;
      return graph::invalid_argument("IDX file '" + path + "': cannot decompress it: " + gzerror(file.get(), &code));
    }
    if (got == 0) break;
    if (bytes.size() + static_cast<size_t>(got) > kMaxIdxBytes + 64) {
      return graph::invalid_argument("IDX file '" + path + "': larger than " + std::to_string(kMaxIdxBytes) + " bytes");
    }
    bytes.insert(bytes.end(), chunk, chunk + got);
  }
  return parse_idx(bytes, path);
}

ArrayField idx_field(std::string name, IdxArray array) {
  Field field{.name = std::move(name), .type = ElementType::u8,
              .shape = std::vector<int64_t>(array.dims.begin() + (array.dims.empty() ? 0 : 1), array.dims.end())};
  return owned_array(std::move(field), std::move(array.values));
}

}  // namespace mirra::runtime::data
