// TFRecord's framing: CRC-32C with ISA-L, the mask, a record framed, the header and footer checks.
#include "runtime/data/tfrecord_framing.h"

#include <isa-l/crc.h>

#include <algorithm>
#include <cstring>

namespace mirra::runtime::data {

namespace {

constexpr uint32_t kMaskDelta = 0xa282ead8u;

uint32_t read_u32(const std::byte* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;  // little-endian, as x86-64 is
}

}  // namespace

uint32_t crc32c(std::span<const std::byte> bytes) {
  uint32_t crc = 0xffffffffu;
  // ISA-L's iSCSI CRC is CRC-32C without its final inversion; it takes int lengths.
  for (size_t done = 0; done < bytes.size();) {
    const size_t chunk = std::min<size_t>(bytes.size() - done, size_t{1} << 30);
    crc = crc32_iscsi(const_cast<unsigned char*>(reinterpret_cast<const unsigned char*>(bytes.data() + done)), static_cast<int>(chunk), crc);
    done += chunk;
  }
  return ~crc;
}

uint32_t masked_crc32c(std::span<const std::byte> bytes) {
  const uint32_t crc = crc32c(bytes);
  return ((crc >> 15) | (crc << 17)) + kMaskDelta;
}

std::string tfrecord_frame(std::string_view record) {
  const auto bytes = [](const void* p, size_t n) { return std::span(static_cast<const std::byte*>(p), n); };
  const uint64_t length = record.size();
  const uint32_t length_crc = masked_crc32c(bytes(&length, 8));
  const uint32_t data_crc = masked_crc32c(bytes(record.data(), record.size()));
  std::string framed(kTfRecordHeaderBytes + record.size() + kTfRecordFooterBytes, '\0');
  std::memcpy(framed.data(), &length, 8);  // little-endian, as x86-64 is
  std::memcpy(framed.data() + 8, &length_crc, 4);
  std::memcpy(framed.data() + kTfRecordHeaderBytes, record.data(), record.size());
  std::memcpy(framed.data() + kTfRecordHeaderBytes + record.size(), &data_crc, 4);
  return framed;
}

graph::Expected<uint64_t> tfrecord_length(std::span<const std::byte, kTfRecordHeaderBytes> header, const std::string& where) {
  if (masked_crc32c(header.first(8)) != read_u32(header.data() + 8)) {
    return graph::invalid_argument(where + ": corrupt (its length's CRC-32C does not match)");
  }
  uint64_t length;
  std::memcpy(&length, header.data(), 8);
  return length;
}

bool tfrecord_data_intact(std::span<const std::byte> data, std::span<const std::byte, kTfRecordFooterBytes> footer) {
  return masked_crc32c(data) == read_u32(footer.data());
}

}  // namespace mirra::runtime::data
