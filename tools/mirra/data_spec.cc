// DataSpec: the shorthand, and the config's "data" object read strictly (every key named in its
// error) and printed back.
#include "tools/mirra/data_spec.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "strategies/config_json.h"

namespace mirra::runner {

namespace {

using nlohmann::json;
using strategies::config_key_error;

// The format files of these names hold, or empty when their extensions do not say one.
std::string format_of_files(const std::vector<std::string>& files) {
  // A directory holding Fashion-MNIST's files is its; any other is a folder of images by class.
  if (files.size() == 1 && std::filesystem::is_directory(files[0])) {
    return std::filesystem::exists(std::filesystem::path(files[0]) / "train-images-idx3-ubyte.gz") ? "fashion_mnist" : "images";
  }
  const auto all = [&](auto pred) { return !files.empty() && std::all_of(files.begin(), files.end(), pred); };
  if (all([](const std::string& f) { return f.ends_with(".npy") || f.ends_with(".npz"); })) return "numpy";
  if (all([](const std::string& f) { return f.ends_with(".csv"); })) return "csv";
  if (all([](const std::string& f) {
        return f.ends_with(".tfrecord") || f.ends_with(".tfrecords") || f.ends_with(".tfrecord.gz") || f.ends_with(".tfrecords.gz");
      })) {
    return "tfrecord";
  }
  return "";
}

// TFRecord files all named .gz are GZIP-compressed unless the spec says otherwise.
bool gzip_names(const std::vector<std::string>& files) {
  return !files.empty() && std::all_of(files.begin(), files.end(), [](const std::string& f) { return f.ends_with(".gz"); });
}

graph::Status check_spec(const DataSpec& spec, std::string_view source, const std::string& key) {
  if (spec.files.empty()) return config_key_error(source, key + ".files", "must name at least one file");
  if ((spec.format == "fashion_mnist" || spec.format == "images") && spec.files.size() != 1) {
    return config_key_error(source, key + ".files", "must be one directory for " + spec.format);
  }
  return graph::Status();
}

graph::Expected<std::vector<double>> read_channels(const json& value, std::string_view source, const std::string& key,
                                                   bool positive) {
  const json list = value.is_array() ? value : json::array({value});
  std::vector<double> out;
  for (const json& v : list) {
    if (!v.is_number() || !std::isfinite(v.get<double>()) || (positive && !(v.get<double>() > 0))) {
      return config_key_error(source, key, positive ? "must be a positive number or a list of them, one per channel"
                                                    : "must be a number or a list of them, one per channel");
    }
    out.push_back(v.get<double>());
  }
  if (out.empty()) return config_key_error(source, key, "must hold at least one number");
  return out;
}

graph::Expected<FieldFeed> read_field_feed(const json& value, std::string_view source, const std::string& key) {
  FieldFeed feed;
  if (value.is_string()) {
    feed.field = value.get<std::string>();
    if (feed.field.empty()) return config_key_error(source, key, "must name a field");
    return feed;
  }
  if (!value.is_object()) return config_key_error(source, key, "must be a field's name or an object with \"field\"");
  MIRRA_RETURN_IF_ERROR(strategies::check_config_keys(value, {"field", "scale", "mean", "stddev", "one_hot"}, source, key + "."));
  if (!value.contains("field") || !value.at("field").is_string() || value.at("field").get<std::string>().empty()) {
    return config_key_error(source, key + ".field", "must name a field");
  }
  feed.field = value.at("field").get<std::string>();
  if (value.contains("scale")) {
    const json& scale = value.at("scale");
    if (!scale.is_number() || !std::isfinite(scale.get<double>()) || scale.get<double>() == 0) {
      return config_key_error(source, key + ".scale", "must be a finite, non-zero number");
    }
    feed.scale = scale.get<double>();
  }
  if (value.contains("mean")) {
    MIRRA_ASSIGN_OR_RETURN(feed.mean, read_channels(value.at("mean"), source, key + ".mean", false));
  }
  if (value.contains("stddev")) {
    MIRRA_ASSIGN_OR_RETURN(feed.stddev, read_channels(value.at("stddev"), source, key + ".stddev", true));
  }
  if (value.contains("one_hot")) {
    const json& depth = value.at("one_hot");
    if (!depth.is_number_integer() || depth.get<int64_t>() < 1 || depth.get<int64_t>() > (int64_t{1} << 24)) {
      return config_key_error(source, key + ".one_hot", "must be a number of classes in [1, 16777216]");
    }
    feed.one_hot = depth.get<int64_t>();
    if (value.contains("scale") || value.contains("mean") || value.contains("stddev")) {
      return config_key_error(source, key + ".one_hot", "does not combine with a normalisation");
    }
  }
  return feed;
}

graph::Status read_tokens(const json& value, std::string_view source, const std::string& key, TokenSpec& out) {
  if (!value.is_object()) return config_key_error(source, key, "must be an object");
  MIRRA_RETURN_IF_ERROR(strategies::check_config_keys(value, {"type", "context", "sampling"}, source, key + "."));
  if (value.contains("type")) {
    const json& type = value.at("type");
    if (!type.is_string() || (type != "u8" && type != "u16" && type != "u32")) {
      return config_key_error(source, key + ".type", "must be \"u8\" (text as bytes), \"u16\" or \"u32\"");
    }
    out.type = type.get<std::string>();
  }
  if (!value.contains("context") || !value.at("context").is_number_integer() || value.at("context").get<int64_t>() < 1 ||
      value.at("context").get<int64_t>() > (int64_t{1} << 24)) {
    return config_key_error(source, key + ".context", "must be a number of tokens in [1, 16777216]");
  }
  out.context = value.at("context").get<int64_t>();
  if (value.contains("sampling")) {
    const json& sampling = value.at("sampling");
    if (!sampling.is_string() || (sampling != "random" && sampling != "sequential")) {
      return config_key_error(source, key + ".sampling", "must be \"random\" or \"sequential\"");
    }
    out.sampling = sampling.get<std::string>();
  }
  return graph::Status();
}

graph::Status read_images(const json& value, std::string_view source, const std::string& key, ImageSpec& out) {
  if (!value.is_object()) return config_key_error(source, key, "must be an object");
  MIRRA_RETURN_IF_ERROR(strategies::check_config_keys(value, {"size", "channels"}, source, key + "."));
  const json size = value.value("size", json());
  const auto dim = [](const json& d) { return d.is_number_integer() && d.get<int64_t>() >= 1 && d.get<int64_t>() <= 65536; };
  if (!size.is_array() || size.size() != 2 || !dim(size[0]) || !dim(size[1])) {
    return config_key_error(source, key + ".size", "must be [height, width], each in [1, 65536]");
  }
  out.height = size[0].get<int64_t>();
  out.width = size[1].get<int64_t>();
  if (value.contains("channels")) {
    const json& channels = value.at("channels");
    if (!channels.is_number_integer() || (channels != 1 && channels != 3 && channels != 4)) {
      return config_key_error(source, key + ".channels", "must be 1 (gray), 3 (RGB) or 4 (RGBA)");
    }
    out.channels = channels.get<int64_t>();
  }
  return graph::Status();
}

graph::Status read_features(const json& value, std::string_view source, const std::string& key,
                            std::map<std::string, runtime::data::TfFeature>& out) {
  if (!value.is_object() || value.empty()) return config_key_error(source, key, "must map feature names to their types and shapes");
  for (const auto& [name, spec] : value.items()) {
    const std::string where = key + "." + name;
    if (!spec.is_object()) return config_key_error(source, where, "must be an object with \"type\" and \"shape\"");
    MIRRA_RETURN_IF_ERROR(strategies::check_config_keys(spec, {"type", "shape", "decode"}, source, where + "."));
    runtime::data::TfFeature feature;
    if (!spec.contains("type") || !spec.at("type").is_string() ||
        (spec.at("type") != "int64" && spec.at("type") != "float" && spec.at("type") != "bytes")) {
      return config_key_error(source, where + ".type", "must be \"int64\", \"float\" or \"bytes\"");
    }
    feature.type = spec.at("type").get<std::string>();
    const json shape = spec.value("shape", json::array());
    if (!shape.is_array() || !std::all_of(shape.begin(), shape.end(), [](const json& d) {
          return d.is_number_integer() && d.get<int64_t>() >= 0 && d.get<int64_t>() <= (int64_t{1} << 31);
        })) {
      return config_key_error(source, where + ".shape", "must be a list of non-negative dims (empty: one value)");
    }
    feature.shape = shape.get<std::vector<int64_t>>();
    if (spec.contains("decode")) {
      const json& decode = spec.at("decode");
      if (!decode.is_string() || (decode != "raw" && decode != "image")) {
        return config_key_error(source, where + ".decode", "must be \"raw\" (the bytes as u8 values) or \"image\" (PNG or JPEG)");
      }
      feature.decode = decode.get<std::string>();
    }
    out[name] = std::move(feature);
  }
  return graph::Status();
}

graph::Expected<DataSpec> read_spec(const json& value, std::string_view source, const std::string& key) {
  if (!value.is_object()) return config_key_error(source, key, "must be an object");
  MIRRA_RETURN_IF_ERROR(strategies::check_config_keys(
      value, {"format", "files", "columns", "tokens", "features", "compression", "images", "fields"}, source, key + "."));
  DataSpec spec;
  if (value.contains("files")) {
    const json& files = value.at("files");
    const auto non_empty = [](const json& f) { return f.is_string() && !f.get<std::string>().empty(); };
    if (!files.is_array() || !std::all_of(files.begin(), files.end(), non_empty)) {
      return config_key_error(source, key + ".files", "must be a list of paths");
    }
    spec.files = files.get<std::vector<std::string>>();
  }
  if (value.contains("format")) {
    const json& format = value.at("format");
    const auto known = [&](const std::string& f) { return std::find(std::begin(kDataFormats), std::end(kDataFormats), f) != std::end(kDataFormats); };
    if (!format.is_string() || !known(format.get<std::string>())) {
      return config_key_error(source, key + ".format",
                              "must be \"fashion_mnist\", \"numpy\", \"csv\", \"tokens\", \"tfrecord\" or \"images\", not " +
                                  format.dump());
    }
    spec.format = format.get<std::string>();
  } else {
    spec.format = format_of_files(spec.files);
    if (spec.format.empty() && !spec.files.empty()) {
      return config_key_error(source, key + ".format",
                              "is needed: the files' names do not say it (.npy, .npz, .csv, .tfrecord, .tfrecord.gz or a directory)");
    }
  }
  if (value.contains("columns")) {
    const json& columns = value.at("columns");
    const auto names = [](const json& list) {
      return list.is_array() && !list.empty() &&
             std::all_of(list.begin(), list.end(), [](const json& c) { return c.is_string() && !c.get<std::string>().empty(); });
    };
    if (spec.format != "csv") return config_key_error(source, key + ".columns", "applies to csv files only");
    if (!columns.is_object()) return config_key_error(source, key + ".columns", "must map fields to lists of columns");
    for (const auto& [field, list] : columns.items()) {
      if (!names(list)) return config_key_error(source, key + ".columns." + field, "must be a list of column names");
      spec.columns[field] = list.get<std::vector<std::string>>();
    }
  }
  if (value.contains("tokens") != (spec.format == "tokens")) {
    return config_key_error(source, key + ".tokens", spec.format == "tokens" ? "must say how the token file is cut into windows"
                                                                             : "applies to token files only");
  }
  if (value.contains("tokens")) MIRRA_RETURN_IF_ERROR(read_tokens(value.at("tokens"), source, key + ".tokens", spec.tokens));
  if (value.contains("images") != (spec.format == "images")) {
    return config_key_error(source, key + ".images", spec.format == "images" ? "must say the size the images are resized to"
                                                                             : "applies to folders of images only");
  }
  if (value.contains("images")) MIRRA_RETURN_IF_ERROR(read_images(value.at("images"), source, key + ".images", spec.images));
  if (value.contains("features") != (spec.format == "tfrecord")) {
    return config_key_error(source, key + ".features", spec.format == "tfrecord" ? "must name the features a TFRecord data set reads"
                                                                                 : "applies to TFRecord files only");
  }
  if (value.contains("features")) MIRRA_RETURN_IF_ERROR(read_features(value.at("features"), source, key + ".features", spec.features));
  if (value.contains("compression")) {
    const json& compression = value.at("compression");
    if (spec.format != "tfrecord") return config_key_error(source, key + ".compression", "applies to TFRecord files only");
    if (!compression.is_string() || (compression != "gzip" && compression != "none")) {
      return config_key_error(source, key + ".compression", "must be \"gzip\" or \"none\"");
    }
    spec.gzip = compression == "gzip";
  } else if (spec.format == "tfrecord") {
    spec.gzip = gzip_names(spec.files);
  }
  if (value.contains("fields")) {
    const json& fields = value.at("fields");
    if (!fields.is_object()) return config_key_error(source, key + ".fields", "must map placeholders to fields");
    for (const auto& [placeholder, feed] : fields.items()) {
      MIRRA_ASSIGN_OR_RETURN(spec.fields[placeholder], read_field_feed(feed, source, key + ".fields." + placeholder));
    }
  }
  MIRRA_RETURN_IF_ERROR(check_spec(spec, source, key));
  return spec;
}

json field_feed_json(const FieldFeed& feed) {
  json out = {{"field", feed.field}};
  if (feed.scale != 1) out["scale"] = feed.scale;
  if (!feed.mean.empty()) out["mean"] = feed.mean;
  if (!feed.stddev.empty()) out["stddev"] = feed.stddev;
  if (feed.one_hot > 0) out["one_hot"] = feed.one_hot;
  return out;
}

}  // namespace

graph::Expected<DataSpec> parse_data_shorthand(std::string_view text, std::string_view what) {
  DataSpec spec;
  const std::string list(text);
  for (size_t start = 0; start <= list.size();) {
    const size_t comma = std::min(list.find(',', start), list.size());
    spec.files.push_back(list.substr(start, comma - start));
    start = comma + 1;
  }
  if (std::find(spec.files.begin(), spec.files.end(), "") != spec.files.end()) {
    return graph::invalid_argument(std::string(what) + " '" + list + "' holds an empty path");
  }
  spec.format = format_of_files(spec.files);
  if (spec.format.empty()) {
    return graph::invalid_argument(std::string(what) + " '" + list +
                                   "' is neither a directory of Fashion-MNIST's IDX files nor .npy/.npz or .csv files "
                                   "(a config's \"data\" can name the format)");
  }
  if (spec.format == "fashion_mnist" && spec.files.size() != 1) {
    return graph::invalid_argument(std::string(what) + ": one Fashion-MNIST directory at a time");
  }
  if (spec.format == "tfrecord") {
    return graph::invalid_argument(std::string(what) + " '" + list + "': TFRecord files need the features they hold named, in a "
                                   "config's data (docs/data.md)");
  }
  if (spec.format == "images") {
    return graph::invalid_argument(std::string(what) + " '" + list + "' holds no Fashion-MNIST files; as a folder of images by "
                                   "class it needs the size they are resized to, in a config's data (docs/data.md)");
  }
  return spec;
}

graph::Expected<DataConfig> data_config_from_json(const json& data, std::string_view source) {
  if (!data.is_object()) return config_key_error(source, "data", "must be an object");
  MIRRA_RETURN_IF_ERROR(strategies::check_config_keys(data, {"train", "eval", "threads", "shuffle_buffer", "shard", "skip_corrupt"}, source, "data."));
  DataConfig config;
  if (data.contains("train")) {
    MIRRA_ASSIGN_OR_RETURN(config.train, read_spec(data.at("train"), source, "data.train"));
  }
  if (data.contains("eval")) {
    MIRRA_ASSIGN_OR_RETURN(config.eval, read_spec(data.at("eval"), source, "data.eval"));
  }
  if (data.contains("threads")) {
    const json& threads = data.at("threads");
    if (!threads.is_number_integer() || threads.get<int64_t>() < 1 || threads.get<int64_t>() > 1024) {
      return config_key_error(source, "data.threads", "must be an integer in [1, 1024]");
    }
    config.threads = threads.get<int>();
  }
  if (data.contains("shuffle_buffer")) {
    const json& buffer = data.at("shuffle_buffer");
    if (!buffer.is_number_integer() || buffer.get<int64_t>() < 1) {
      return config_key_error(source, "data.shuffle_buffer", "must be a positive integer (records)");
    }
    config.shuffle_buffer = buffer.get<int64_t>();
  }
  if (data.contains("shard")) {
    const json& shard = data.at("shard");
    if (shard == "example") {
      config.shard = runtime::data::ShardPolicy::example;
    } else if (shard == "file") {
      config.shard = runtime::data::ShardPolicy::file;
    } else if (shard == "auto") {
      config.shard = runtime::data::ShardPolicy::automatic;
    } else {
      return config_key_error(source, "data.shard", "must be \"example\", \"file\" or \"auto\"");
    }
  }
  if (data.contains("skip_corrupt")) {
    if (!data.at("skip_corrupt").is_boolean()) return config_key_error(source, "data.skip_corrupt", "must be true or false");
    config.skip_corrupt = data.at("skip_corrupt").get<bool>();
  }
  return config;
}

json data_spec_json(const DataSpec& spec) {
  json out = {{"format", spec.format}, {"files", spec.files}};
  if (!spec.columns.empty()) out["columns"] = spec.columns;
  if (spec.format == "tokens") out["tokens"] = {{"type", spec.tokens.type}, {"context", spec.tokens.context}, {"sampling", spec.tokens.sampling}};
  if (spec.format == "images") out["images"] = {{"size", {spec.images.height, spec.images.width}}, {"channels", spec.images.channels}};
  if (spec.format == "tfrecord") {
    json features = json::object();
    for (const auto& [name, feature] : spec.features) {
      features[name] = {{"type", feature.type}, {"shape", feature.shape}, {"decode", feature.decode}};
    }
    out["features"] = features;
    out["compression"] = spec.gzip ? "gzip" : "none";
  }
  if (!spec.fields.empty()) {
    json fields = json::object();
    for (const auto& [placeholder, feed] : spec.fields) fields[placeholder] = field_feed_json(feed);
    out["fields"] = fields;
  }
  return out;
}

json data_config_json(const DataConfig& config) {
  const char* shard = config.shard == runtime::data::ShardPolicy::example ? "example"
                      : config.shard == runtime::data::ShardPolicy::file  ? "file"
                                                                          : "auto";
  json out = {{"threads", config.threads}, {"shuffle_buffer", config.shuffle_buffer}, {"shard", shard}, {"skip_corrupt", config.skip_corrupt}};
  if (config.train) out["train"] = data_spec_json(*config.train);
  if (config.eval) out["eval"] = data_spec_json(*config.eval);
  return out;
}

}  // namespace mirra::runner
