// StrategyConfig parsing: strict keys and types, errors naming the key and the source.
#include "strategies/config.h"

#include "runtime/collectives/communicator_registry.h"
#include "runtime/gpu_devices.h"
#include "serialization/file_io.h"
#include "strategies/config_json.h"

#include <nlohmann/json.hpp>

#include <set>
#include <vector>

namespace mirra::strategies {

namespace {

using nlohmann::json;

graph::Expected<double> positive_mb(const json& object, const char* key, const char* path, std::string_view source,
                                    double fallback) {
  if (!object.contains(key)) return fallback;
  const json& value = object.at(key);
  if (!value.is_number()) return config_key_error(source, path, "must be a number of MiB");
  const double mb = value.get<double>();
  if (!(mb > 0 && mb <= 65536)) return config_key_error(source, path, "must be in (0, 65536] MiB");
  return mb;
}

// Strategies of one replica (per process, for parameter_server's workers): one device.
bool takes_one_device(std::string_view strategy) { return strategy == "one_device" || strategy == "parameter_server"; }

}  // namespace

std::vector<graph::DeviceId> default_devices(std::string_view strategy, int logical_gpus_per_gpu) {
  if (const auto gpus = runtime::list_gpus(); gpus.ok()) {
    std::vector<graph::DeviceId> devices;
    for (int i = 0; i < static_cast<int>(gpus->size()) * logical_gpus_per_gpu; ++i) devices.push_back({graph::DeviceKind::gpu, i});
    if (takes_one_device(strategy)) devices.resize(1);
    return devices;
  }
  if (takes_one_device(strategy)) return {{graph::DeviceKind::cpu, 0}};
  return {{graph::DeviceKind::cpu, 0}, {graph::DeviceKind::cpu, 1}};
}

graph::Expected<StrategyConfig> parse_strategy_config(std::string_view json_text, std::string_view source) {
  MIRRA_ASSIGN_OR_RETURN(const json root, parse_config_object(json_text, source));
  return strategy_config_from_json(root, source);
}

graph::Expected<json> parse_config_object(std::string_view json_text, std::string_view source) {
  // JSON lets a key repeat (the last one wins), so a typo can silently change a run: the parser's
  // callback keeps the keys of each open object and records the first one that repeats.
  struct OpenObject {
    std::set<std::string> keys;
    std::string path;  // "training." for keys inside "training"
  };
  std::vector<OpenObject> open;
  std::string next_path, duplicate;
  const json::parser_callback_t track_keys = [&](int, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::object_start) {
      open.push_back({{}, next_path});
    } else if (event == json::parse_event_t::object_end) {
      open.pop_back();
    } else if (event == json::parse_event_t::key && !open.empty()) {
      const std::string key = parsed.get<std::string>();
      if (!open.back().keys.insert(key).second && duplicate.empty()) duplicate = open.back().path + key;
      next_path = open.back().path + key + ".";
    }
    return true;
  };
  json root;
  try {
    root = json::parse(json_text, track_keys);
  } catch (const json::exception& e) {
    return graph::invalid_argument(std::string(source) + ": not valid JSON: " + e.what());
  }
  if (!duplicate.empty()) return config_key_error(source, duplicate, "appears twice");
  if (!root.is_object()) return graph::invalid_argument(std::string(source) + ": the config must be a JSON object");
  return root;
}

graph::Expected<StrategyConfig> strategy_config_from_json(const json& root, std::string_view source) {
  MIRRA_RETURN_IF_ERROR(check_config_keys(
      root, {"strategy", "devices", "logical_gpus_per_gpu", "all_reduce", "shard_optimizer_state", "min_shard_bytes", "update_mode", "staleness"},
      source, ""));
  StrategyConfig config;
  if (root.contains("strategy")) {
    if (!root.at("strategy").is_string()) return config_key_error(source, "strategy", "must be a string");
    config.strategy = root.at("strategy").get<std::string>();
  }
  if (config.strategy != "one_device" && config.strategy != "mirrored" && config.strategy != "central_storage" &&
      config.strategy != "multi_worker_mirrored" && config.strategy != "parameter_server") {
    return config_key_error(source, "strategy",
                            "is '" + config.strategy +
                                "', not one of one_device, mirrored, central_storage, multi_worker_mirrored, parameter_server");
  }
  if (root.contains("logical_gpus_per_gpu")) {
    const json& per_gpu = root.at("logical_gpus_per_gpu");
    if (!per_gpu.is_number_integer() || per_gpu.get<int64_t>() < 1 || per_gpu.get<int64_t>() > kMaxLogicalGpusPerGpu) {
      return config_key_error(source, "logical_gpus_per_gpu",
                              "must be an integer in [1, " + std::to_string(kMaxLogicalGpusPerGpu) + "]");
    }
    config.logical_gpus_per_gpu = per_gpu.get<int>();
  }
  if (root.contains("devices")) {
    const json& devices = root.at("devices");
    if (!devices.is_array() || devices.empty()) return config_key_error(source, "devices", "must be a non-empty list like [\"cpu:0\"]");
    for (size_t i = 0; i < devices.size(); ++i) {
      const std::string path = "devices[" + std::to_string(i) + "]";
      if (!devices[i].is_string()) return config_key_error(source, path, "must be a device name like \"cpu:0\"");
      auto device = graph::DeviceId::parse(devices[i].get<std::string>());
      if (!device.ok()) return config_key_error(source, path, device.status().message());
      for (const graph::DeviceId& seen : config.devices) {
        if (seen == *device) return config_key_error(source, path, "repeats " + device->to_string());
      }
      config.devices.push_back(*device);
    }
    if (takes_one_device(config.strategy) && config.devices.size() != 1) {
      return config_key_error(source, "devices", "must name exactly one device for " + config.strategy);
    }
  } else {
    config.devices = default_devices(config.strategy, config.logical_gpus_per_gpu);
  }
  if (root.contains("min_shard_bytes")) {
    const json& bytes = root.at("min_shard_bytes");
    if (!bytes.is_number_integer() || bytes.get<int64_t>() < 0) {
      return config_key_error(source, "min_shard_bytes", "must be a number of bytes, 0 or more");
    }
    if (bytes.get<int64_t>() > 0 && config.strategy != "parameter_server") {
      return config_key_error(source, "min_shard_bytes", "applies to parameter_server, whose servers hold parts of variables, not to " + config.strategy);
    }
    config.min_shard_bytes = bytes.get<int64_t>();
  }
  if (root.contains("update_mode")) {
    const json& mode = root.at("update_mode");
    if (!mode.is_string() || (mode.get<std::string>() != "async" && mode.get<std::string>() != "sync")) {
      return config_key_error(source, "update_mode", "must be \"async\" or \"sync\"");
    }
    if (config.strategy != "parameter_server") {
      return config_key_error(source, "update_mode", "applies to parameter_server, whose servers apply the updates, not to " + config.strategy);
    }
    config.asynchronous = mode.get<std::string>() == "async";
  }
  if (root.contains("staleness")) {
    const json& staleness = root.at("staleness");
    if (!staleness.is_number_integer() || staleness.get<int64_t>() < 0 || staleness.get<int64_t>() > 1000000) {
      return config_key_error(source, "staleness", "must be a number of steps, 0 or more");
    }
    if (config.strategy != "parameter_server" || config.asynchronous) {
      return config_key_error(source, "staleness", "bounds how far a worker runs ahead under parameter_server's \"update_mode\": \"sync\"");
    }
    config.staleness = staleness.get<int>();
  }
  if (root.contains("shard_optimizer_state")) {
    if (!root.at("shard_optimizer_state").is_boolean()) return config_key_error(source, "shard_optimizer_state", "must be true or false");
    config.shard_optimizer_state = root.at("shard_optimizer_state").get<bool>();
    if (const std::string problem = shard_optimizer_state_problem(config); !problem.empty()) {
      return config_key_error(source, "shard_optimizer_state", problem);
    }
  }
  if (root.contains("all_reduce")) {
    const json& all_reduce = root.at("all_reduce");
    if (!all_reduce.is_object()) return config_key_error(source, "all_reduce", "must be an object");
    MIRRA_RETURN_IF_ERROR(
        check_config_keys(all_reduce, {"implementation", "bucket_mb", "first_bucket_mb", "timeout_s", "compression"}, source,
                          "all_reduce."));
    if (all_reduce.contains("implementation")) {
      if (!all_reduce["implementation"].is_string()) return config_key_error(source, "all_reduce.implementation", "must be a string");
      config.all_reduce.implementation = all_reduce["implementation"].get<std::string>();
      if (!runtime::is_communicator_name(config.all_reduce.implementation)) {
        return config_key_error(source, "all_reduce.implementation",
                                "is '" + config.all_reduce.implementation + "', not one of " + runtime::communicator_names());
      }
    }
    MIRRA_ASSIGN_OR_RETURN(config.all_reduce.bucket_mb,
                           positive_mb(all_reduce, "bucket_mb", "all_reduce.bucket_mb", source, 25));
    MIRRA_ASSIGN_OR_RETURN(config.all_reduce.first_bucket_mb,
                           positive_mb(all_reduce, "first_bucket_mb", "all_reduce.first_bucket_mb", source, 1));
    if (all_reduce.contains("timeout_s")) {
      const json& timeout = all_reduce.at("timeout_s");
      if (!timeout.is_number()) return config_key_error(source, "all_reduce.timeout_s", "must be a number of seconds");
      const double seconds = timeout.get<double>();
      if (!(seconds >= 0 && seconds <= 86400)) {
        return config_key_error(source, "all_reduce.timeout_s", "must be in [0, 86400] seconds (0: no deadline)");
      }
      config.all_reduce.timeout_s = seconds;
    }
    if (all_reduce.contains("compression")) {
      const json& compression = all_reduce.at("compression");
      if (!compression.is_string() || (compression != "none" && compression != "bf16")) {
        return config_key_error(source, "all_reduce.compression", "must be \"none\" or \"bf16\"");
      }
      config.all_reduce.compression = compression.get<std::string>();
    }
  }
  if (const std::string problem = compression_problem(config); !problem.empty()) {
    return config_key_error(source, "all_reduce.compression", problem);
  }
  return config;
}

std::string compression_problem(const StrategyConfig& config) {
  if (config.all_reduce.compression == "none") return "";
  if (config.strategy != "mirrored" && config.strategy != "multi_worker_mirrored") {
    return "applies to the gradient all-reduce of mirrored and multi_worker_mirrored, not to " + config.strategy;
  }
  if (config.shard_optimizer_state) return "does not apply with shard_optimizer_state, whose gradients are reduce-scattered";
  return "";
}

std::string shard_optimizer_state_problem(const StrategyConfig& config) {
  if (!config.shard_optimizer_state) return "";
  if (config.strategy != "mirrored" && config.strategy != "multi_worker_mirrored") {
    return "applies to mirrored and multi_worker_mirrored, whose replicas each keep optimizer slots, not to " +
           config.strategy;
  }
  return "";
}

graph::Status config_key_error(std::string_view source, std::string_view key, const std::string& what) {
  return graph::invalid_argument(std::string(source) + ": '" + std::string(key) + "' " + what);
}

graph::Status check_config_keys(const json& object, std::initializer_list<std::string_view> known,
                                std::string_view source, std::string_view prefix) {
  for (auto it = object.begin(); it != object.end(); ++it) {
    bool found = false;
    for (std::string_view k : known) found |= k == it.key();
    if (!found) {
      std::string keys;
      for (std::string_view k : known) keys += (keys.empty() ? "" : ", ") + std::string(k);
      return graph::invalid_argument(std::string(source) + ": unknown key '" + std::string(prefix) + it.key() +
                                     "' (known: " + keys + ")");
    }
  }
  return graph::Status();
}

graph::Expected<StrategyConfig> load_strategy_config(const std::string& path) {
  MIRRA_ASSIGN_OR_RETURN(const std::string text, serialization::read_text_file(path, "strategy config"));
  return parse_strategy_config(text, path);
}

}  // namespace mirra::strategies
