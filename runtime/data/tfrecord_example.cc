// tf.train.Example decoding: the spec's checks, protobuf parsing, and each feature copied or decoded
// as an image into its field.
#include "runtime/data/tfrecord_example.h"

#include <algorithm>
#include <cstring>

#include "runtime/data/example.pb.h"
#include "runtime/data/image_decoding.h"

namespace mirra::runtime::data {

namespace {

graph::Status copy_feature(const tfrecord::Feature& feature, const TfFeature& spec, const Field& field, std::byte* out,
                           const std::function<std::string()>& where) {
  const int64_t want = field.elements();
  const auto count_error = [&](int64_t got) {
    return graph::invalid_argument(where() + ": " + std::to_string(got) + " values, where its shape " +
                                   field.to_string().substr(field.name.size() + 2) + " holds " + std::to_string(want));
  };
  const char* kinds[] = {"none", "bytes", "float", "int64"};
  const std::string kind = kinds[static_cast<int>(feature.kind_case())];
  if (kind != spec.type) return graph::invalid_argument(where() + ": a " + kind + " list, not " + spec.type);
  if (spec.type == "int64") {
    if (feature.int64_list().value_size() != want) return count_error(feature.int64_list().value_size());
    std::memcpy(out, feature.int64_list().value().data(), static_cast<size_t>(want) * sizeof(int64_t));
    return graph::Status();
  }
  if (spec.type == "float") {
    if (feature.float_list().value_size() != want) return count_error(feature.float_list().value_size());
    std::memcpy(out, feature.float_list().value().data(), static_cast<size_t>(want) * sizeof(float));
    return graph::Status();
  }
  if (feature.bytes_list().value_size() != 1) {
    return graph::invalid_argument(where() + ": " + std::to_string(feature.bytes_list().value_size()) + " byte strings, not one");
  }
  const std::string& bytes = feature.bytes_list().value(0);
  if (spec.decode == "raw") {
    if (static_cast<int64_t>(bytes.size()) != want) return count_error(static_cast<int64_t>(bytes.size()));
    std::memcpy(out, bytes.data(), bytes.size());
    return graph::Status();
  }
  auto image = decode_image(std::as_bytes(std::span(bytes.data(), bytes.size())), spec.shape[2]);
  if (!image.ok()) return graph::invalid_argument(where() + ": " + image.status().message());
  if (image->height != spec.shape[0] || image->width != spec.shape[1]) {
    return graph::invalid_argument(where() + ": a " + std::to_string(image->height) + "x" + std::to_string(image->width) +
                                   " image, not " + std::to_string(spec.shape[0]) + "x" + std::to_string(spec.shape[1]));
  }
  std::memcpy(out, image->pixels.data(), image->pixels.size());
  return graph::Status();
}

}  // namespace

graph::Status check_tf_features(const std::map<std::string, TfFeature>& features) {
  if (features.empty()) return graph::invalid_argument("a TFRecord data set needs the features it reads");
  for (const auto& [name, spec] : features) {
    const std::string where = "TFRecord feature '" + name + "'";
    if (spec.type != "int64" && spec.type != "float" && spec.type != "bytes") {
      return graph::invalid_argument(where + ": type '" + spec.type + "' is not int64, float or bytes");
    }
    for (int64_t d : spec.shape) {
      if (d < 0) return graph::invalid_argument(where + ": a negative dim");
    }
    if (spec.decode != "raw" && spec.decode != "image") return graph::invalid_argument(where + ": decode '" + spec.decode + "' is not raw or image");
    if (spec.decode == "image" &&
        (spec.type != "bytes" || spec.shape.size() != 3 || (spec.shape[2] != 1 && spec.shape[2] != 3 && spec.shape[2] != 4))) {
      return graph::invalid_argument(where + ": an image is a bytes feature of shape [height, width, 1, 3 or 4 channels]");
    }
  }
  return graph::Status();
}

TfExampleDecoder::TfExampleDecoder(std::map<std::string, TfFeature> features) : features_(std::move(features)) {
  for (const auto& [feature, spec] : features_) {
    fields_.push_back({feature, spec.type == "int64" ? ElementType::i64 : spec.type == "float" ? ElementType::f32 : ElementType::u8,
                       spec.shape});
    specs_.push_back(&spec);
  }
}

graph::Status TfExampleDecoder::decode(std::span<const std::byte> bytes, const std::function<std::string()>& where,
                                       std::span<std::byte* const> out) const {
  tfrecord::Example example;
  if (!example.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return graph::invalid_argument(where() + ": not a tf.train.Example");
  }
  const auto& features = example.features().feature();
  for (size_t f = 0; f < fields_.size() && f < out.size(); ++f) {
    if (out[f] == nullptr) continue;
    const auto found = features.find(fields_[f].name);
    if (found == features.end()) {
      std::vector<std::string> sorted;
      for (const auto& [name, value] : features) sorted.push_back(name);
      std::sort(sorted.begin(), sorted.end());  // a map's order is protobuf's to choose
      std::string names;
      for (const std::string& name : sorted) names += (names.empty() ? "" : ", ") + name;
      return graph::invalid_argument(where() + " has no feature '" + fields_[f].name + "' (its features: " +
                                     (names.empty() ? std::string("none") : names) + ")");
    }
    const auto feature_where = [&] { return where() + ", feature '" + fields_[f].name + "'"; };
    MIRRA_RETURN_IF_ERROR(copy_feature(found->second, *specs_[f], fields_[f], out[f], feature_where));
  }
  return graph::Status();
}

}  // namespace mirra::runtime::data
