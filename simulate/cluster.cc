// parse_cluster: a cluster file's JSON, every number checked and named when wrong.
#include "simulate/cluster.h"

#include <nlohmann/json.hpp>

#include <optional>
#include <set>

#include "serialization/file_io.h"

namespace mirra::simulate {

namespace {

using nlohmann::json;

constexpr graph::DType kDTypes[] = {graph::DType::f32, graph::DType::f64, graph::DType::bf16, graph::DType::f16};

// Reads one object of a cluster file, refusing keys it does not know and naming what is wrong.
class Reader {
 public:
  Reader(const json& object, std::string where, std::string file) : object_(object), where_(std::move(where)), file_(std::move(file)) {}

  graph::Status check_object() const {
    if (!object_.is_object()) {
      return graph::invalid_argument(file_ + ": " + (where_.empty() ? "" : "'" + where_ + "' ") + "must be a JSON object");
    }
    return graph::Status();
  }
  // Refuses a key outside `known`.
  graph::Status only(std::initializer_list<const char*> known) const {
    const std::set<std::string> keys(known.begin(), known.end());
    for (const auto& [key, value] : object_.items()) {
      if (!keys.contains(key)) return error(path(key), "is not a key of a cluster file (docs/simulate.md)");
    }
    return graph::Status();
  }
  bool has(const char* key) const { return object_.contains(key); }
  // A number > 0 (or >= 0 with `zero_allowed`); `fallback` when absent, or an error when there is none.
  graph::Expected<double> number(const char* key, std::optional<double> fallback = std::nullopt, bool zero_allowed = false) const {
    if (!object_.contains(key)) {
      if (fallback) return *fallback;
      return error(path(key), "is missing");
    }
    const json& value = object_.at(key);
    if (!value.is_number() || !(value.get<double>() > 0 || (zero_allowed && value.get<double>() == 0))) {
      return error(path(key), zero_allowed ? "must be a number >= 0" : "must be a number > 0");
    }
    return value.get<double>();
  }
  graph::Expected<std::string> text(const char* key, std::optional<std::string> fallback = std::nullopt) const {
    if (!object_.contains(key)) {
      if (fallback) return *fallback;
      return error(path(key), "is missing");
    }
    if (!object_.at(key).is_string()) return error(path(key), "must be a string");
    return object_.at(key).get<std::string>();
  }
  graph::Expected<Reader> child(const char* key) const {
    if (!object_.contains(key)) return error(path(key), "is missing");
    Reader reader(object_.at(key), path(key), file_);
    MIRRA_RETURN_IF_ERROR(reader.check_object());
    return reader;
  }
  // A bandwidth in bytes/s from `<prefix>_gb_s` (bytes) or `<prefix>_gbit_s` (bits): exactly one.
  graph::Expected<double> bandwidth(const std::string& prefix) const {
    const std::string bytes = prefix + "_gb_s", bits = prefix + "_gbit_s";
    if (has(bytes.c_str()) == has(bits.c_str())) {
      return error(path(bytes), "or '" + path(bits) + "' must be given, one of them");
    }
    if (has(bytes.c_str())) {
      MIRRA_ASSIGN_OR_RETURN(const double gb, number(bytes.c_str()));
      return gb * 1e9;
    }
    MIRRA_ASSIGN_OR_RETURN(const double gbit, number(bits.c_str()));
    return gbit * 1e9 / 8;
  }
  const json& object() const { return object_; }
  std::string path(const std::string& key) const { return where_.empty() ? key : where_ + "." + key; }
  graph::Status error(const std::string& key, const std::string& what) const {
    return graph::invalid_argument(file_ + ": '" + key + "' " + what);
  }

 private:
  const json& object_;
  std::string where_;
  std::string file_;
};

graph::Expected<DeviceSpec> parse_device(const Reader& r) {
  MIRRA_RETURN_IF_ERROR(r.only({"name", "tflops", "memory_bandwidth_gb_s", "compute_efficiency", "memory_efficiency",
                                "kernel_overhead_us"}));
  DeviceSpec device;
  MIRRA_ASSIGN_OR_RETURN(device.name, r.text("name", "device"));
  MIRRA_ASSIGN_OR_RETURN(const Reader tflops, r.child("tflops"));
  for (const auto& [key, value] : tflops.object().items()) {
    const graph::DType* dtype = nullptr;
    for (const graph::DType& d : kDTypes) {
      if (graph::dtype_name(d) == key) dtype = &d;
    }
    if (dtype == nullptr) return r.error(tflops.path(key), "is not a dtype products run in (f32, f64, bf16, f16)");
    MIRRA_ASSIGN_OR_RETURN(const double rate, tflops.number(key.c_str()));
    device.flops[*dtype] = rate * 1e12;
  }
  if (!device.flops.contains(graph::DType::f32)) return r.error(tflops.path("f32"), "is missing");
  MIRRA_ASSIGN_OR_RETURN(const double bandwidth, r.number("memory_bandwidth_gb_s"));
  device.memory_bandwidth = bandwidth * 1e9;
  MIRRA_ASSIGN_OR_RETURN(device.compute_efficiency, r.number("compute_efficiency", 1.0));
  MIRRA_ASSIGN_OR_RETURN(device.memory_efficiency, r.number("memory_efficiency", 1.0));
  if (device.compute_efficiency > 1) return r.error(r.path("compute_efficiency"), "must be at most 1");
  if (device.memory_efficiency > 1) return r.error(r.path("memory_efficiency"), "must be at most 1");
  MIRRA_ASSIGN_OR_RETURN(const double overhead, r.number("kernel_overhead_us", 0.0, /*zero_allowed=*/true));
  device.kernel_overhead = overhead * 1e-6;
  return device;
}

graph::Expected<LinkSpec> parse_link(const Reader& r, bool network, int devices_per_node) {
  if (network) {
    MIRRA_RETURN_IF_ERROR(r.only({"bandwidth_gb_s", "bandwidth_gbit_s", "per", "latency_us"}));
  } else {
    MIRRA_RETURN_IF_ERROR(r.only({"bandwidth_gb_s", "bandwidth_gbit_s", "latency_us"}));
  }
  LinkSpec link;
  MIRRA_ASSIGN_OR_RETURN(link.bandwidth, r.bandwidth("bandwidth"));
  MIRRA_ASSIGN_OR_RETURN(const double latency, r.number("latency_us", std::nullopt, /*zero_allowed=*/true));
  link.latency = latency * 1e-6;
  if (network) {
    MIRRA_ASSIGN_OR_RETURN(const std::string per, r.text("per"));
    if (per != "node" && per != "device") return r.error(r.path("per"), "must be \"node\" or \"device\", not \"" + per + "\"");
    if (per == "device") link.bandwidth *= devices_per_node;  // kept per node
  }
  return link;
}

}  // namespace

double DeviceSpec::achieved_flops(graph::DType dtype) const {
  const auto it = flops.find(dtype);
  return (it != flops.end() ? it->second : flops.at(graph::DType::f32)) * compute_efficiency;
}

graph::Expected<ClusterSpec> parse_cluster(const std::string& text, const std::string& file) {
  const json parsed = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) return graph::invalid_argument(file + ": not valid JSON");
  const Reader r(parsed, "", file);
  MIRRA_RETURN_IF_ERROR(r.check_object());
  MIRRA_RETURN_IF_ERROR(r.only({"name", "nodes", "devices_per_node", "device", "intra_node", "inter_node", "sources"}));
  ClusterSpec cluster;
  MIRRA_ASSIGN_OR_RETURN(cluster.name, r.text("name", file));
  for (const auto& [key, field] : {std::pair{"nodes", &cluster.nodes}, std::pair{"devices_per_node", &cluster.devices_per_node}}) {
    MIRRA_ASSIGN_OR_RETURN(const double count, r.number(key));
    if (count != static_cast<double>(static_cast<int>(count)) || count > 65536) {
      return r.error(key, "must be a whole number up to 65536");
    }
    *field = static_cast<int>(count);
  }
  MIRRA_ASSIGN_OR_RETURN(const Reader device, r.child("device"));
  MIRRA_ASSIGN_OR_RETURN(cluster.device, parse_device(device));
  MIRRA_ASSIGN_OR_RETURN(const Reader intra, r.child("intra_node"));
  MIRRA_ASSIGN_OR_RETURN(cluster.intra_node, parse_link(intra, /*network=*/false, cluster.devices_per_node));
  if (cluster.nodes > 1 || r.has("inter_node")) {
    MIRRA_ASSIGN_OR_RETURN(const Reader inter, r.child("inter_node"));
    MIRRA_ASSIGN_OR_RETURN(cluster.inter_node, parse_link(inter, /*network=*/true, cluster.devices_per_node));
  }
  if (r.has("sources")) {
    MIRRA_ASSIGN_OR_RETURN(const Reader sources, r.child("sources"));
    for (const auto& [key, value] : sources.object().items()) {
      if (!value.is_string()) return r.error(sources.path(key), "must be a string");
      cluster.sources[key] = value.get<std::string>();
    }
  }
  return cluster;
}

graph::Expected<ClusterSpec> read_cluster(const std::string& path) {
  MIRRA_ASSIGN_OR_RETURN(const std::string text, serialization::read_text_file(path, "cluster file"));
  return parse_cluster(text, path);
}

}  // namespace mirra::simulate
