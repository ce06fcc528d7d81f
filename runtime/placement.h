// The passes a session runs on its graph before any plan (TensorFlow's placer and its copy insertion
// in graph partitioning), each followed by graph::verify_structure:
//   1. place_nodes: every node gets a device (its own, else the default); a device without a kernel
//      for the node's op and dtype is an error naming node, op and device, or, with soft placement,
//      the node moves to cpu:0.
//   2. insert_copies: an edge whose value lives in another memory space than its consumer reads goes
//      through a copy: CopyToHost on the producer's device (its stream reads device memory and
//      writes host memory), CopyFromHost on the consumer's (the reverse); device to device is both.
//      A value lives in its device's memory, or in host memory for the outputs a kernel declares
//      host-memory (KernelDef::host_memory_outputs: the values fed to placeholders, say); a
//      consumer reads its device's memory, or the host's for its host-memory inputs. One copy per
//      value and memory space serves every consumer there.
//
// REQUIRES: the graph passes verify_structure; its devices are in `devices`.
// ENSURES: every node has a device of `devices` with a kernel for it, and every edge connects
//   values and consumers in the same memory space.
#pragma once

#include "graph/graph.h"
#include "runtime/device.h"
#include "runtime/kernel.h"

namespace mirra::runtime {

// The runtime's own ops, which insert_copies adds (ops/ registers their schemas and kernels).
inline constexpr std::string_view kCopyToHostOp = "CopyToHost";
inline constexpr std::string_view kCopyFromHostOp = "CopyFromHost";

struct PlacementOptions {
  graph::DeviceId default_device;  // for nodes with no device
  bool soft_placement = false;     // a node its device cannot run goes to cpu:0 instead of failing
};

graph::Status place_nodes(graph::Graph& graph, const KernelRegistry& kernels, const DeviceSet& devices,
                          const PlacementOptions& options);
graph::Status insert_copies(graph::Graph& graph, const KernelRegistry& kernels, const DeviceSet& devices);

// Both passes, in order, each verified.
graph::Status prepare_graph(graph::Graph& graph, const KernelRegistry& kernels, const DeviceSet& devices,
                            const PlacementOptions& options);

// Where output `output` of placed node `node` lives.
MemorySpace value_memory_space(const graph::Node& node, size_t output, const KernelRegistry& kernels,
                               const DeviceSet& devices);

}  // namespace mirra::runtime
