// What a collective over p devices of a cluster costs, by the alpha-beta model: each message pays
// its link's latency (alpha) plus its bytes over the link's bandwidth (beta per byte). Devices fill
// nodes in order; messages that leave a node share its network bandwidth. The algorithms, with
// their sources and the formulas written out, are in docs/simulate.md:
//   ring          2(p-1) steps of n/p bytes (Patarasuk and Yuan, 2009); across nodes each step's
//                 slowest hop is the network, whose node bandwidth one ring's flow gets;
//   tree          recursive halving then doubling (Rabenseifner's; Thakur, Rabenseifner and Gropp,
//                 2005): 2 log2 p steps of n/2, n/4, ... bytes, the nearest partners first; with p
//                 not a power of two the extra devices first hand their data to a partner and take
//                 the result back;
//   hierarchical  a ring reduce-scatter within each node, an all-reduce of each device's 1/g among
//                 the nodes (g rings sharing the node's network), a ring all-gather within the node.
// A reduce-scatter or all-gather is the first or second half of the same schedule.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "graph/status.h"
#include "simulate/cluster.h"

namespace mirra::simulate {

enum class Algorithm { ring, tree, hierarchical };

std::string_view algorithm_name(Algorithm algorithm);
graph::Expected<Algorithm> algorithm_from_name(std::string_view name);
std::vector<Algorithm> all_algorithms();

enum class CollectiveKind { all_reduce, reduce_scatter, all_gather };

// Seconds for `kind` of `bytes` (each device's whole buffer) over the first `devices` devices of
// `cluster` by `algorithm`; zero for one device.
double collective_seconds(CollectiveKind kind, Algorithm algorithm, double bytes, int devices, const ClusterSpec& cluster);

// NCCL's bus bandwidth of an all-reduce (its algorithm bandwidth, bytes / seconds, times
// 2 (p - 1) / p): what each link carries, comparable across device counts.
double all_reduce_bus_bandwidth(double bytes, int devices, double seconds);

}  // namespace mirra::simulate
