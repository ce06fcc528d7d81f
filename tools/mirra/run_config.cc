// RunConfig parsing and printing (nlohmann-json); the strategy keys go to strategies::strategy_config_from_json.
#include "tools/mirra/run_config.h"

#include <nlohmann/json.hpp>

#include <algorithm>

#include "runtime/data/fashion_mnist.h"
#include "runtime/memory_estimate.h"
#include "serialization/file_io.h"
#include "strategies/config_json.h"

namespace mirra::runner {

namespace {

using nlohmann::json;

constexpr int64_t kMaxMemoryLimit = int64_t{1} << 62;

// Reads object[key] into `out` when present: an integer within [low, high].
template <class T>
graph::Status read_integer(const json& object, const char* key, const std::string& path, std::string_view source,
                           int64_t low, int64_t high, T& out) {
  if (!object.contains(key)) return graph::Status();
  const json& value = object.at(key);
  if (!value.is_number_integer()) return strategies::config_key_error(source, path, "must be an integer");
  // nlohmann reads every non-negative integer as unsigned, and one above INT64_MAX only fits there.
  const bool in_range = value.is_number_unsigned()
                            ? value.get<uint64_t>() <= static_cast<uint64_t>(high) &&
                                  (low <= 0 || value.get<uint64_t>() >= static_cast<uint64_t>(low))
                            : value.get<int64_t>() >= low && value.get<int64_t>() <= high;
  if (!in_range) {
    return strategies::config_key_error(source, path, "must be in [" + std::to_string(low) + ", " + std::to_string(high) + "]");
  }
  out = static_cast<T>(value.get<int64_t>());
  return graph::Status();
}

graph::Status read_string(const json& object, const char* key, const std::string& path, std::string_view source,
                          std::string& out) {
  if (!object.contains(key)) return graph::Status();
  if (!object.at(key).is_string()) return strategies::config_key_error(source, path, "must be a string");
  out = object.at(key).get<std::string>();
  return graph::Status();
}

graph::Status read_boolean(const json& object, const char* key, const std::string& path, std::string_view source, bool& out) {
  if (!object.contains(key)) return graph::Status();
  if (!object.at(key).is_boolean()) return strategies::config_key_error(source, path, "must be true or false");
  out = object.at(key).get<bool>();
  return graph::Status();
}

graph::Status read_number(const json& object, const char* key, const std::string& path, std::string_view source,
                          double low, double high, double& out) {
  if (!object.contains(key)) return graph::Status();
  const json& value = object.at(key);
  if (!value.is_number() || !(value.get<double>() >= low) || !(value.get<double>() <= high)) {
    return strategies::config_key_error(source, path, "must be a number in [" + json(low).dump() + ", " + json(high).dump() + "]");
  }
  out = value.get<double>();
  return graph::Status();
}

graph::Status read_schedule(const json& s, std::string_view source, runtime::training::LearningRateSchedule& out) {
  if (!s.is_object()) return strategies::config_key_error(source, "training.schedule", "must be an object");
  MIRRA_RETURN_IF_ERROR(strategies::check_config_keys(s, {"kind", "warmup_steps", "decay_steps", "decay_rate", "alpha"},
                                                       source, "training.schedule."));
  MIRRA_RETURN_IF_ERROR(read_string(s, "kind", "training.schedule.kind", source, out.kind));
  if (out.kind != "constant" && out.kind != "step" && out.kind != "cosine") {
    return strategies::config_key_error(source, "training.schedule.kind", "is '" + out.kind + "', not one of constant, step, cosine");
  }
  MIRRA_RETURN_IF_ERROR(read_integer(s, "warmup_steps", "training.schedule.warmup_steps", source, 0, int64_t{1} << 40, out.warmup_steps));
  MIRRA_RETURN_IF_ERROR(read_integer(s, "decay_steps", "training.schedule.decay_steps", source, 0, int64_t{1} << 40, out.decay_steps));
  MIRRA_RETURN_IF_ERROR(read_number(s, "decay_rate", "training.schedule.decay_rate", source, 0, 1, out.decay_rate));
  MIRRA_RETURN_IF_ERROR(read_number(s, "alpha", "training.schedule.alpha", source, 0, 1, out.alpha));
  const graph::Status status = out.check();
  if (!status.ok()) return graph::invalid_argument(std::string(source) + ": 'training.schedule' " + status.message());
  return graph::Status();
}

graph::Status read_augmentation(const json& a, std::string_view source, runtime::data::ImageAugmentation& out) {
  if (!a.is_object()) return strategies::config_key_error(source, "training.augmentation", "must be an object");
  MIRRA_RETURN_IF_ERROR(strategies::check_config_keys(a, {"crop_padding", "horizontal_flip"}, source, "training.augmentation."));
  MIRRA_RETURN_IF_ERROR(read_integer(a, "crop_padding", "training.augmentation.crop_padding", source, 0, 1 << 20,
                                     out.crop_padding));
  return read_boolean(a, "horizontal_flip", "training.augmentation.horizontal_flip", source, out.horizontal_flip);
}

graph::Status read_weight_decay(const json& t, std::string_view source, TrainingConfig& out) {
  if (t.contains("weight_decay")) {
    const json& decay = t.at("weight_decay");
    if (!decay.is_number() || !(decay.get<double>() >= 0) || !(decay.get<double>() < 1e6)) {
      return strategies::config_key_error(source, "training.weight_decay", "must be a number in [0, 1e6)");
    }
    out.weight_decay = decay.get<double>();
  }
  if (t.contains("exclude_from_weight_decay")) {
    const json& names = t.at("exclude_from_weight_decay");
    const auto non_empty_string = [](const json& name) { return name.is_string() && !name.get<std::string>().empty(); };
    if (!names.is_array() || !std::all_of(names.begin(), names.end(), non_empty_string)) {
      return strategies::config_key_error(source, "training.exclude_from_weight_decay",
                                          "must be a list of non-empty strings, like [\"gamma\", \"beta\"]");
    }
    out.exclude_from_weight_decay = names.get<std::vector<std::string>>();
  }
  return graph::Status();
}

graph::Status read_training(const json& t, std::string_view source, TrainingConfig& out) {
  if (!t.is_object()) return strategies::config_key_error(source, "training", "must be an object");
  MIRRA_RETURN_IF_ERROR(strategies::check_config_keys(
      t, {"data", "epochs", "steps", "batch_size", "accumulation_steps", "learning_rate", "schedule", "seed",
          "deterministic", "threads", "memory_limit", "check_numerics", "soft_placement", "allow_tf32",
          "cuda_graph", "mixed_precision", "sync_batch_norm", "weight_decay", "exclude_from_weight_decay", "lazy_updates", "augmentation",
          "recompute", "logdir", "logdir_per_worker", "histogram_every"},
      source, "training."));
  if (t.contains("schedule")) MIRRA_RETURN_IF_ERROR(read_schedule(t.at("schedule"), source, out.schedule));
  if (t.contains("augmentation")) MIRRA_RETURN_IF_ERROR(read_augmentation(t.at("augmentation"), source, out.augmentation));
  MIRRA_RETURN_IF_ERROR(read_weight_decay(t, source, out));
  MIRRA_RETURN_IF_ERROR(read_string(t, "data", "training.data", source, out.data));
  MIRRA_RETURN_IF_ERROR(read_integer(t, "epochs", "training.epochs", source, 0, 1'000'000, out.epochs));
  MIRRA_RETURN_IF_ERROR(read_integer(t, "steps", "training.steps", source, 0, int64_t{1} << 40, out.steps));
  MIRRA_RETURN_IF_ERROR(read_integer(t, "batch_size", "training.batch_size", source, 1, 1 << 20, out.batch_size));
  MIRRA_RETURN_IF_ERROR(read_integer(t, "accumulation_steps", "training.accumulation_steps", source, 1, 1 << 20,
                                     out.accumulation_steps));
  MIRRA_RETURN_IF_ERROR(read_integer(t, "seed", "training.seed", source, 0, kMaxSeed, out.seed));
  MIRRA_RETURN_IF_ERROR(read_integer(t, "threads", "training.threads", source, 0, 1024, out.threads));
  MIRRA_RETURN_IF_ERROR(read_string(t, "logdir", "training.logdir", source, out.logdir));
  MIRRA_RETURN_IF_ERROR(read_boolean(t, "logdir_per_worker", "training.logdir_per_worker", source, out.logdir_per_worker));
  MIRRA_RETURN_IF_ERROR(
      read_integer(t, "histogram_every", "training.histogram_every", source, 0, int64_t{1} << 40, out.histogram_every));
  if (t.contains("learning_rate")) {
    const json& lr = t.at("learning_rate");
    if (!lr.is_number() || !(lr.get<double>() > 0) || !(lr.get<double>() < 1e6)) {
      return strategies::config_key_error(source, "training.learning_rate", "must be a number in (0, 1e6)");
    }
    out.learning_rate = lr.get<double>();
  }
  MIRRA_RETURN_IF_ERROR(read_boolean(t, "deterministic", "training.deterministic", source, out.deterministic));
  MIRRA_RETURN_IF_ERROR(read_boolean(t, "check_numerics", "training.check_numerics", source, out.check_numerics));
  if (t.contains("lazy_updates")) {
    bool lazy = false;
    MIRRA_RETURN_IF_ERROR(read_boolean(t, "lazy_updates", "training.lazy_updates", source, lazy));
    out.lazy_updates = lazy;
  }
  MIRRA_RETURN_IF_ERROR(read_boolean(t, "soft_placement", "training.soft_placement", source, out.soft_placement));
  MIRRA_RETURN_IF_ERROR(read_boolean(t, "allow_tf32", "training.allow_tf32", source, out.allow_tf32));
  MIRRA_RETURN_IF_ERROR(read_boolean(t, "cuda_graph", "training.cuda_graph", source, out.cuda_graph));
  if (t.contains("mixed_precision")) {
    const json& mode = t.at("mixed_precision");
    const auto parsed = mode.is_string() ? ops::parse_mixed_precision(mode.get<std::string>())
                                         : graph::Expected<ops::MixedPrecision>(graph::invalid_argument(""));
    if (!parsed.ok()) {
      return strategies::config_key_error(source, "training.mixed_precision", "must be \"off\", \"bf16\" or \"fp16\", not " + mode.dump());
    }
    out.mixed_precision = *parsed;
  }
  if (t.contains("recompute")) {
    const json& mode = t.at("recompute");
    const auto parsed = mode.is_string() ? ops::parse_recompute(mode.get<std::string>())
                                         : graph::Expected<ops::Recompute>(graph::invalid_argument(""));
    if (!parsed.ok()) {
      return strategies::config_key_error(source, "training.recompute", "must be \"none\", \"blocks\" or \"all\", not " + mode.dump());
    }
    out.recompute = *parsed;
  }
  if (t.contains("memory_limit") && t.at("memory_limit").is_string()) {
    auto bytes = parse_byte_size(t.at("memory_limit").get<std::string>(), "'training.memory_limit'");
    if (!bytes.ok()) return graph::invalid_argument(std::string(source) + ": " + bytes.status().message());
    out.memory_limit = *bytes;
  } else {
    MIRRA_RETURN_IF_ERROR(read_integer(t, "memory_limit", "training.memory_limit", source, 0, kMaxMemoryLimit, out.memory_limit));
  }
  return graph::Status();
}

graph::Status read_checkpoint(const json& c, std::string_view source, CheckpointConfig& out) {
  if (!c.is_object()) return strategies::config_key_error(source, "checkpoint", "must be an object");
  MIRRA_RETURN_IF_ERROR(strategies::check_config_keys(c, {"dir", "keep", "every_steps"}, source, "checkpoint."));
  MIRRA_RETURN_IF_ERROR(read_string(c, "dir", "checkpoint.dir", source, out.dir));
  MIRRA_RETURN_IF_ERROR(read_integer(c, "keep", "checkpoint.keep", source, 1, 1000, out.keep));
  return read_integer(c, "every_steps", "checkpoint.every_steps", source, 0, int64_t{1} << 40, out.every_steps);
}

}  // namespace

RunConfig default_run_config() {
  RunConfig config;
  config.training.data = runtime::data::kFashionMnistDir;
  config.strategy.devices = strategies::default_devices(config.strategy.strategy);
  return config;
}

graph::Expected<DataSpec> training_data_spec(const RunConfig& config) {
  if (config.data.train) return *config.data.train;
  return parse_data_shorthand(config.training.data, "training data");
}

graph::Expected<RunConfig> parse_run_config(std::string_view json_text, std::string_view source) {
  MIRRA_ASSIGN_OR_RETURN(json root, strategies::parse_config_object(json_text, source));
  RunConfig config = default_run_config();
  MIRRA_RETURN_IF_ERROR(
      strategies::check_config_keys(root,
                                    {"strategy", "devices", "logical_gpus_per_gpu", "all_reduce", "shard_optimizer_state",
                                     "min_shard_bytes", "update_mode", "staleness", "training", "data", "checkpoint",
                                     "cluster"},
                                    source, ""));
  if (root.contains("training")) MIRRA_RETURN_IF_ERROR(read_training(root["training"], source, config.training));
  // A choice of the strategy's rewrite, written with the training settings (as Keras's layer flag is).
  bool sync_batch_norm = false;
  if (root.contains("training")) {
    MIRRA_RETURN_IF_ERROR(read_boolean(root["training"], "sync_batch_norm", "training.sync_batch_norm", source, sync_batch_norm));
  }
  if (root.contains("checkpoint")) MIRRA_RETURN_IF_ERROR(read_checkpoint(root["checkpoint"], source, config.checkpoint));
  if (root.contains("data")) {
    MIRRA_ASSIGN_OR_RETURN(config.data, data_config_from_json(root["data"], source));
  }
  config.devices_given = root.contains("devices");
  if (root.contains("cluster")) {
    if (!root["cluster"].is_object()) {
      return strategies::config_key_error(source, "cluster", "must be an object {\"ps\": [...], \"worker\": [...]}");
    }
    config.cluster = root["cluster"].dump();
  }
  root.erase("cluster");
  root.erase("training");
  root.erase("data");
  root.erase("checkpoint");
  MIRRA_ASSIGN_OR_RETURN(config.strategy, strategies::strategy_config_from_json(root, source));
  config.strategy.sync_batch_norm = sync_batch_norm;
  return config;
}

graph::Expected<RunConfig> load_run_config(const std::string& path) {
  MIRRA_ASSIGN_OR_RETURN(const std::string text, serialization::read_text_file(path, "config file"));
  return parse_run_config(text, path);
}

std::string run_config_json(const RunConfig& c) {
  json devices = json::array();
  for (const graph::DeviceId& d : c.strategy.devices) devices.push_back(d.to_string());
  json training = {{"data", c.training.data},
                   {"epochs", c.training.epochs},
                   {"steps", c.training.steps},
                   {"batch_size", c.training.batch_size},
                   {"accumulation_steps", c.training.accumulation_steps},
                   {"seed", c.training.seed},
                   {"deterministic", c.training.deterministic},
                   {"threads", c.training.threads},
                   {"memory_limit", c.training.memory_limit},
                   {"check_numerics", c.training.check_numerics},
                   {"soft_placement", c.training.soft_placement},
                   {"allow_tf32", c.training.allow_tf32},
                   {"cuda_graph", c.training.cuda_graph},
                   {"mixed_precision", ops::mixed_precision_name(c.training.mixed_precision)},
                   {"recompute", ops::recompute_name(c.training.recompute)},
                   {"sync_batch_norm", c.strategy.sync_batch_norm},
                   {"logdir", c.training.logdir},
                   {"logdir_per_worker", c.training.logdir_per_worker},
                   {"histogram_every", c.training.histogram_every}};
  if (c.training.learning_rate) training["learning_rate"] = *c.training.learning_rate;
  if (c.training.weight_decay) training["weight_decay"] = *c.training.weight_decay;
  if (c.training.exclude_from_weight_decay) training["exclude_from_weight_decay"] = *c.training.exclude_from_weight_decay;
  if (c.training.lazy_updates) training["lazy_updates"] = *c.training.lazy_updates;
  training["augmentation"] = {{"crop_padding", c.training.augmentation.crop_padding},
                              {"horizontal_flip", c.training.augmentation.horizontal_flip}};
  const runtime::training::LearningRateSchedule& s = c.training.schedule;
  training["schedule"] = {{"kind", s.kind},
                          {"warmup_steps", s.warmup_steps},
                          {"decay_steps", s.decay_steps},
                          {"decay_rate", s.decay_rate},
                          {"alpha", s.alpha}};
  json root = {
      {"strategy", c.strategy.strategy},
      {"devices", devices},
      {"logical_gpus_per_gpu", c.strategy.logical_gpus_per_gpu},
      {"all_reduce",
       {{"implementation", c.strategy.all_reduce.implementation},
        {"bucket_mb", c.strategy.all_reduce.bucket_mb},
        {"first_bucket_mb", c.strategy.all_reduce.first_bucket_mb},
        {"timeout_s", c.strategy.all_reduce.timeout_s},
        {"compression", c.strategy.all_reduce.compression}}},
      {"shard_optimizer_state", c.strategy.shard_optimizer_state},
      {"min_shard_bytes", c.strategy.min_shard_bytes},
      {"training", training},
      {"data", data_config_json(c.data)},
      {"checkpoint", {{"dir", c.checkpoint.dir}, {"keep", c.checkpoint.keep}, {"every_steps", c.checkpoint.every_steps}}}};
  if (c.strategy.strategy == "parameter_server") {
    root["update_mode"] = c.strategy.asynchronous ? "async" : "sync";
    if (!c.strategy.asynchronous) root["staleness"] = c.strategy.staleness;
  }
  if (!c.cluster.empty()) root["cluster"] = json::parse(c.cluster);
  return root.dump(2);
}

graph::Expected<int64_t> parse_byte_size(std::string_view text, std::string_view what) {
  const auto bad = [&] {
    return graph::invalid_argument(std::string(what) + " is '" + std::string(text) +
                                   "', not a size like 16G, 512M, 64K or a number of bytes up to 2^62");
  };
  int shift = 0;
  if (!text.empty()) {
    switch (text.back()) {
      case 'K': case 'k': shift = 10; break;
      case 'M': case 'm': shift = 20; break;
      case 'G': case 'g': shift = 30; break;
      case 'T': case 't': shift = 40; break;
      default: break;
    }
  }
  const std::string_view digits = shift == 0 ? text : text.substr(0, text.size() - 1);
  if (digits.empty() || digits.size() > 19 || !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return bad();
  }
  const int64_t value = std::stoll(std::string(digits));
  if (value > (kMaxMemoryLimit >> shift)) return bad();
  return value << shift;
}

int64_t memory_limit_bytes(int64_t configured) {
  return configured > 0 ? configured : runtime::default_memory_limit();
}

graph::Status check_run_config(const RunConfig& c) {
  if (c.training.epochs <= 0 && c.training.steps <= 0) return graph::invalid_argument("train for at least one epoch or step");
  if (const graph::Status status = c.training.schedule.check(); !status.ok()) {
    return graph::invalid_argument("learning-rate schedule: " + status.message());
  }
  if (c.training.mixed_precision == ops::MixedPrecision::fp16 && c.training.check_numerics) {
    return graph::invalid_argument("fp16 mixed precision skips the steps whose gradients overflow; it does not combine "
                                   "with check_numerics");
  }
  if (const std::string problem = strategies::shard_optimizer_state_problem(c.strategy); !problem.empty()) {
    return graph::invalid_argument("shard_optimizer_state " + problem);
  }
  if (const std::string problem = strategies::compression_problem(c.strategy); !problem.empty()) {
    return graph::invalid_argument("all_reduce.compression " + problem);
  }
  if (c.strategy.shard_optimizer_state && c.training.mixed_precision == ops::MixedPrecision::fp16) {
    return graph::invalid_argument("shard_optimizer_state does not combine with fp16 mixed precision yet (loss scaling "
                                   "checks every whole gradient)");
  }
  if (c.strategy.shard_optimizer_state && c.training.check_numerics) {
    return graph::invalid_argument("shard_optimizer_state does not combine with check_numerics yet (it checks every "
                                   "whole gradient)");
  }
  if (c.strategy.strategy == "one_device" && c.strategy.devices.size() != 1) {
    return graph::invalid_argument("one_device takes exactly one device, not " + std::to_string(c.strategy.devices.size()));
  }
  if (c.training.logdir.empty() && (c.training.histogram_every > 0 || c.training.logdir_per_worker)) {
    return graph::invalid_argument(std::string(c.training.histogram_every > 0 ? "histogram_every" : "logdir_per_worker") +
                                   " needs a log directory (--logdir, training.logdir)");
  }
  return graph::Status();
}

}  // namespace mirra::runner
