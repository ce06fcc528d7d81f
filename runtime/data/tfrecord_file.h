// TFRecord files of tf.train.Example, as TensorFlow writes them, as a data set. A record is its
// length (u64), the length's masked CRC-32C, its bytes, and their masked CRC-32C; the bytes parse as
// an Example (Debian's protobuf, runtime/data/example.proto) whose features the spec names: each a
// fixed-shape field of int64 (i64), float (f32) or bytes, the bytes taken as u8 values or decoded as a
// PNG or JPEG image (u8 [height, width, channels]). Uncompressed files are mapped and indexed (each
// record's place found once, its length's CRC checked), so examples are read at random and a file
// larger than memory is paged in as it is used; GZIP files are inflated into memory first. A record's
// bytes are checked against their CRC when read; with `skip_corrupt` every record is checked when the
// data set opens and a corrupt one left out (and counted). Errors name the file, the record and its
// byte offset, and the feature.
//
//   auto source = tfrecord_source({"train-00000-of-00002", "train-00001-of-00002"},
//                                 {.features = {{"image", {.type = "bytes", .shape = {28, 28, 1}, .decode = "image"}},
//                                               {"label", {.type = "int64", .shape = {}}}}});
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "graph/status.h"
#include "runtime/data/example_source.h"

namespace mirra::runtime::data {

struct TfFeature {
  std::string type = "float";   // "int64", "float" or "bytes"
  std::vector<int64_t> shape;   // per example (a scalar: empty)
  std::string decode = "raw";   // bytes: "raw" (the bytes as u8 values) or "image" (PNG or JPEG)
  friend bool operator==(const TfFeature&, const TfFeature&) = default;
};

struct TfRecordOptions {
  std::map<std::string, TfFeature> features;  // the fields, by feature name
  bool gzip = false;                          // the files are GZIP-compressed (TensorFlow's compression_type="GZIP")
  bool skip_corrupt = false;                  // leave out records whose CRC does not match, counting them
};

// The data set of `paths` (their records in order), and how many corrupt records it left out.
struct TfRecordSource {
  std::shared_ptr<const ExampleSource> source;
  int64_t skipped = 0;
};
graph::Expected<TfRecordSource> tfrecord_source(const std::vector<std::string>& paths, const TfRecordOptions& options);

// CRC-32C (Castagnoli) of `bytes`, and TFRecord's mask of it.
uint32_t crc32c(std::span<const std::byte> bytes);
uint32_t masked_crc32c(std::span<const std::byte> bytes);

}  // namespace mirra::runtime::data
