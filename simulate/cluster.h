// The hardware `mirra simulate` predicts for: nodes of devices, each device's compute rate by dtype
// and memory bandwidth, the link between the devices of a node and the network between nodes, read
// from a cluster file (JSON; presets in examples/clusters/, docs/simulate.md):
//
//   {"name": "8 x H200 (NVLink)", "nodes": 1, "devices_per_node": 8,
//    "device": {"name": "NVIDIA H200 SXM", "tflops": {"f32": 67, "bf16": 989}, "memory_bandwidth_gb_s": 4800,
//               "compute_efficiency": 0.6, "memory_efficiency": 0.8, "kernel_overhead_us": 4},
//    "intra_node": {"bandwidth_gb_s": 370, "latency_us": 3},
//    "inter_node": {"bandwidth_gbit_s": 400, "per": "device", "latency_us": 5},
//    "sources": {"device.tflops": "the datasheet's dense figures", ...}}
//
// Bandwidths are in one direction, per device for the node's link (what NCCL calls bus bandwidth),
// per node or per device for the network; `_gb_s` keys count bytes (1e9 a second), `_gbit_s` bits.
#pragma once

#include <map>
#include <string>

#include "graph/dtype.h"
#include "graph/status.h"

namespace mirra::simulate {

struct DeviceSpec {
  std::string name;
  std::map<graph::DType, double> flops;  // peak FLOP/s of products by operand dtype; f32 at least
  double memory_bandwidth = 0;           // bytes/s
  double compute_efficiency = 1;         // the fraction of the peak FLOP/s kernels reach
  double memory_efficiency = 1;          // the fraction of the bandwidth they reach
  double kernel_overhead = 0;            // seconds each kernel costs beyond its roofline time

  // The FLOP/s kernels reach on products of `dtype` operands (f32's for a dtype it does not list).
  double achieved_flops(graph::DType dtype) const;
};

// One hop: a fixed cost per message (alpha) and a rate (1 / beta).
struct LinkSpec {
  double bandwidth = 0;  // bytes/s, one direction
  double latency = 0;    // seconds
};

struct ClusterSpec {
  std::string name;
  int nodes = 1;
  int devices_per_node = 1;
  DeviceSpec device;
  LinkSpec intra_node;  // per device
  LinkSpec inter_node;  // per node (node_bandwidth() for per-device networks)
  std::map<std::string, std::string> sources;  // where each number comes from, by key

  int devices() const { return nodes * devices_per_node; }
};

// The cluster `text` describes; errors name `file` and the key at fault (a missing or non-positive
// number, an unknown key, a network bandwidth that is neither per node nor per device).
graph::Expected<ClusterSpec> parse_cluster(const std::string& text, const std::string& file);
graph::Expected<ClusterSpec> read_cluster(const std::string& path);

}  // namespace mirra::simulate
