// The alpha-beta costs of collectives (docs/simulate.md, "Communication").
#include "simulate/collective_cost.h"

#include <algorithm>
#include <bit>
#include <cmath>

namespace mirra::simulate {

namespace {

// Where p devices sit: g per node on n nodes (the last node may hold fewer).
struct Layout {
  int devices = 1;
  int per_node = 1;
  int nodes = 1;
};

Layout layout_of(int devices, const ClusterSpec& cluster) {
  const int per_node = std::min(devices, cluster.devices_per_node);
  return {devices, per_node, (devices + per_node - 1) / per_node};
}

double transfer(const LinkSpec& link, double bytes, double bandwidth) { return link.latency + bytes / bandwidth; }

// The first half of a ring all-reduce (a reduce-scatter): p - 1 steps of n / p bytes. Across nodes
// each step waits for its network hop, at the node's bandwidth (one flow leaves each node).
double ring_half(double bytes, const Layout& l, const ClusterSpec& c) {
  if (l.devices == 1) return 0;
  const bool across = l.nodes > 1;
  const LinkSpec& hop = across ? c.inter_node : c.intra_node;
  const double bandwidth = across ? std::min(c.intra_node.bandwidth, c.inter_node.bandwidth) : c.intra_node.bandwidth;
  return (l.devices - 1) * transfer(hop, bytes / l.devices, bandwidth);
}

// Recursive halving (a reduce-scatter) over the largest power of two q <= p, partners at distance
// 1, 2, 4, ... exchanging n/2, n/4, ... bytes; a partner on another node shares the node's network
// with the node's other devices, all sending at once. With p > q the p - q extra devices first send
// their whole buffer to a partner (and receive the result after the doubling: the caller counts it
// once per half).
double halving_half(double bytes, const Layout& l, const ClusterSpec& c) {
  if (l.devices == 1) return 0;
  const int q = std::bit_floor(static_cast<unsigned>(l.devices));
  double seconds = 0;
  double message = bytes / 2;
  for (int distance = 1; distance < q; distance *= 2, message /= 2) {
    const bool across = distance >= l.per_node;
    seconds += across ? transfer(c.inter_node, message, c.inter_node.bandwidth / l.per_node)
                      : transfer(c.intra_node, message, c.intra_node.bandwidth);
  }
  if (q < l.devices) {  // the extras' partner: within the node when it has room, else across
    const bool across = l.per_node < 2 || l.nodes > 1;
    seconds += across ? transfer(c.inter_node, bytes, c.inter_node.bandwidth / l.per_node)
                      : transfer(c.intra_node, bytes, c.intra_node.bandwidth);
  }
  return seconds;
}

// Within each node a ring reduce-scatter over g devices, then each device's 1/g among the nodes (g
// rings at once, each with 1/g of the node's network): the first half of the all-reduce.
double hierarchical_half(double bytes, const Layout& l, const ClusterSpec& c) {
  if (l.devices == 1) return 0;
  const Layout node{l.per_node, l.per_node, 1};
  const double within = ring_half(bytes, node, c);
  if (l.nodes == 1) return within;
  const double share = bytes / l.per_node;
  const double among = (l.nodes - 1) * transfer(c.inter_node, share / l.nodes, c.inter_node.bandwidth / l.per_node);
  return within + among;
}

}  // namespace

std::string_view algorithm_name(Algorithm algorithm) {
  switch (algorithm) {
    case Algorithm::ring: return "ring";
    case Algorithm::tree: return "tree";
    case Algorithm::hierarchical: return "hierarchical";
  }
  return "?";
}

graph::Expected<Algorithm> algorithm_from_name(std::string_view name) {
  for (Algorithm a : all_algorithms()) {
    if (algorithm_name(a) == name) return a;
  }
  return graph::invalid_argument("unknown all-reduce algorithm '" + std::string(name) + "' (ring, tree or hierarchical)");
}

std::vector<Algorithm> all_algorithms() { return {Algorithm::ring, Algorithm::tree, Algorithm::hierarchical}; }

double collective_seconds(CollectiveKind kind, Algorithm algorithm, double bytes, int devices, const ClusterSpec& cluster) {
  const Layout l = layout_of(devices, cluster);
  double half = 0;
  switch (algorithm) {
    case Algorithm::ring: half = ring_half(bytes, l, cluster); break;
    case Algorithm::tree: half = halving_half(bytes, l, cluster); break;
    case Algorithm::hierarchical: half = hierarchical_half(bytes, l, cluster); break;
  }
  return kind == CollectiveKind::all_reduce ? 2 * half : half;
}

double all_reduce_bus_bandwidth(double bytes, int devices, double seconds) {
  if (devices < 2 || seconds <= 0) return 0;
  return bytes / seconds * 2 * (devices - 1) / devices;
}

}  // namespace mirra::simulate
