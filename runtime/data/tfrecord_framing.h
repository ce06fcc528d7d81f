// TFRecord's framing (reading and writing): a record is its length (u64, little-endian), the length's masked CRC-32C, its
// bytes, and their masked CRC-32C. Shared by the mapped files and the GZIP streams.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "graph/status.h"

namespace mirra::runtime::data {

constexpr size_t kTfRecordHeaderBytes = 12;  // the length and its CRC
constexpr size_t kTfRecordFooterBytes = 4;   // the data's CRC

// CRC-32C (Castagnoli) of `bytes`, and TFRecord's mask of it.
uint32_t crc32c(std::span<const std::byte> bytes);
uint32_t masked_crc32c(std::span<const std::byte> bytes);

// A record framed: its header, its bytes and its footer, as a TFRecord file holds it.
std::string tfrecord_frame(std::string_view record);

// The length a record's header holds, or an error (`where` names the record) when its CRC does not match.
graph::Expected<uint64_t> tfrecord_length(std::span<const std::byte, kTfRecordHeaderBytes> header, const std::string& where);
// Whether a record's data matches the CRC in the footer that follows it.
bool tfrecord_data_intact(std::span<const std::byte> data, std::span<const std::byte, kTfRecordFooterBytes> footer);

}  // namespace mirra::runtime::data
