// DataSpec: a data set as the config and the flags name it: its format, its files, and which field
// feeds which placeholder of the model, with the field's normalisation or one-hot encoding. Written
// in a config's "data" object ("train", "eval") or as --data's shorthand (a directory of Fashion-MNIST
// IDX files, or comma-separated .npy/.npz or .csv files whose arrays or columns are named as the
// placeholders).
//
//   "data": {"train": {"format": "numpy", "files": ["train.npz"],
//                      "fields": {"images": {"field": "x", "scale": 0.00392, "mean": [0.286], "stddev": [0.353]},
//                                 "labels": "y"}},
//            "eval": {"files": ["test.npz"]}, "threads": 2}
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "graph/status.h"
#include "runtime/data/dataset.h"
#include "runtime/data/tfrecord_file.h"

namespace mirra::runner {

// How one placeholder is fed: from `field`, as (value * scale - mean[c]) / stddev[c] into a floating
// placeholder (c the channel, the last dim; one entry applies to all), or one-hot encoded.
struct FieldFeed {
  std::string field;
  double scale = 1;
  std::vector<double> mean, stddev;
  int64_t one_hot = 0;
  friend bool operator==(const FieldFeed&, const FieldFeed&) = default;
};

// How the images of a folder by class are decoded and resized (runtime/data/image_folder.h).
struct ImageSpec {
  int64_t height = 0, width = 0;  // required
  int64_t channels = 3;           // 1 gray, 3 RGB, 4 RGBA
  friend bool operator==(const ImageSpec&, const ImageSpec&) = default;
};

// How a token file is cut into windows (runtime/data/token_file.h).
struct TokenSpec {
  std::string type = "u16";          // u8 (text as bytes), u16 or u32
  int64_t context = 0;               // tokens per window (inputs; targets are the next ones)
  std::string sampling = "random";   // "random" offsets (nanoGPT's) or "sequential" windows
  friend bool operator==(const TokenSpec&, const TokenSpec&) = default;
};

struct DataSpec {
  // "fashion_mnist" (files: one directory of its IDX files), "numpy" (.npy and .npz files), "csv"
  // (files with a header, of numbers), "tokens" (one file of token ids, cut into windows),
  // "tfrecord" (files of tf.train.Example) or "images" (files: one folder of images by class).
  std::string format;
  std::vector<std::string> files;
  // csv: fields that join several columns, in order (a regression's inputs); every other column is a
  // field of its own.
  std::map<std::string, std::vector<std::string>> columns;
  TokenSpec tokens;  // tokens only
  ImageSpec images;  // images only
  // tfrecord: the features read (runtime/data/tfrecord_file.h), and whether the files are GZIP.
  std::map<std::string, runtime::data::TfFeature> features;
  bool gzip = false;
  // By placeholder. Empty: Fashion-MNIST's images and labels feed the model's features and labels;
  // other formats feed each placeholder of the model from the field of its name.
  std::map<std::string, FieldFeed> fields;
  friend bool operator==(const DataSpec&, const DataSpec&) = default;
};

struct DataConfig {
  std::optional<DataSpec> train;  // unset: training.data's shorthand
  std::optional<DataSpec> eval;   // unset: Fashion-MNIST's test split beside its training split
  int threads = 1;                // threads that assemble a batch's examples
  int64_t shuffle_buffer = 10'000;  // records a stream's shuffle draws from (GZIP TFRecord files)
  // How a multi-worker run divides the training data: by example (exact), or a stream's files dealt to
  // the workers.
  runtime::data::ShardPolicy shard = runtime::data::ShardPolicy::example;
  bool skip_corrupt = false;      // TFRecord: leave out records whose CRC does not match (counted), not fail
  friend bool operator==(const DataConfig&, const DataConfig&) = default;
};

inline constexpr const char* kDataFormats[] = {"fashion_mnist", "numpy", "csv", "tokens", "tfrecord", "images"};

// --data's shorthand: a directory is Fashion-MNIST's; otherwise comma-separated files, whose format
// their extensions say (.npy, .npz; .csv). Errors name `what`.
graph::Expected<DataSpec> parse_data_shorthand(std::string_view text, std::string_view what);
// The "data" object of a config file; `source` names the file in errors.
graph::Expected<DataConfig> data_config_from_json(const nlohmann::json& data, std::string_view source);
nlohmann::json data_config_json(const DataConfig& config);
nlohmann::json data_spec_json(const DataSpec& spec);

}  // namespace mirra::runner
