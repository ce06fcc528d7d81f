// tf.train.Example decoding: a feature spec (each feature a fixed-shape field of int64 (i64), float
// (f32) or bytes, the bytes taken as u8 values or decoded as a PNG or JPEG image, u8 [height, width,
// channels]) and the decoder that parses a record's bytes with protobuf (runtime/data/example.proto)
// and copies or decodes its features into the fields. Errors name the record and the feature.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "graph/status.h"
#include "runtime/data/field.h"

namespace mirra::runtime::data {

struct TfFeature {
  std::string type = "float";   // "int64", "float" or "bytes"
  std::vector<int64_t> shape;   // per example (a scalar: empty)
  std::string decode = "raw";   // bytes: "raw" (the bytes as u8 values) or "image" (PNG or JPEG)
  friend bool operator==(const TfFeature&, const TfFeature&) = default;
};

// Refuses an empty spec, unknown types and decodings, negative dims, and images not shaped [h, w, 1|3|4].
graph::Status check_tf_features(const std::map<std::string, TfFeature>& features);

class TfExampleDecoder {
 public:
  // `features` must have passed check_tf_features.
  explicit TfExampleDecoder(std::map<std::string, TfFeature> features);

  // The fields, one per feature, in the order of their names.
  const std::vector<Field>& fields() const { return fields_; }
  // Parses `bytes` as an Example and copies the value of each field f whose out[f] is not null into
  // out[f]; `where` names the record in an error.
  graph::Status decode(std::span<const std::byte> bytes, const std::function<std::string()>& where,
                       std::span<std::byte* const> out) const;

 private:
  std::map<std::string, TfFeature> features_;
  std::vector<Field> fields_;
  std::vector<const TfFeature*> specs_;
};

}  // namespace mirra::runtime::data
