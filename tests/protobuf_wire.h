// Protocol-buffer wire format written by hand (varints, numbers, length-delimited fields), so tests
// and fuzzers can say what no well-formed sender would: a runtime::GrpcCommunicator delivery with a
// dtype mirra lacks, a negative dimension, bytes that do not fill the shape.
#pragma once

#include <cstdint>
#include <string>

namespace mirra::test {

inline std::string varint(uint64_t value) {
  std::string out;
  do {
    uint8_t byte = value & 0x7f;
    value >>= 7;
    if (value != 0) byte |= 0x80;
    out.push_back(static_cast<char>(byte));
  } while (value != 0);
  return out;
}

inline std::string number_field(int field, int64_t value) {
  return varint(static_cast<uint64_t>(field) << 3) + varint(static_cast<uint64_t>(value));
}

inline std::string bytes_field(int field, const std::string& value) {
  return varint((static_cast<uint64_t>(field) << 3) | 2) + varint(value.size()) + value;
}

// A transfers.proto Delivery from task 0 to task 1 of group "g" with `token`, `fingerprint` and
// `rest` (its instance, dtype, shape, data, timeout), field by field.
inline std::string delivery(const std::string& token, const std::string& fingerprint, const std::string& rest) {
  return bytes_field(1, token) + bytes_field(2, fingerprint) + number_field(3, 0) + number_field(4, 1) + bytes_field(5, "g") + rest;
}

}  // namespace mirra::test
