// to_dot: items (nodes, or boxes of a scope's nodes) placed in a tree of device and scope clusters, and
// the edges between items.
#include "graph/dot.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <set>
#include <vector>

namespace mirra::graph {

namespace {

// Fill colours of the devices' nodes, in the order the devices first appear.
constexpr const char* kDeviceColours[] = {"#dbe9f6", "#fde4cf", "#d9f2d9", "#f3dcf3", "#fff6bf", "#e0e0e0"};

std::string escaped(std::string_view text) {
  std::string out;
  for (const char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

std::string device_name(const Node& node) { return node.device ? node.device->to_string() : "host"; }

std::vector<std::string> scopes_of(const std::string& name) {
  std::vector<std::string> scopes;
  for (size_t start = 0, slash; (slash = name.find('/', start)) != std::string::npos; start = slash + 1) {
    scopes.push_back(name.substr(start, slash - start));
  }
  return scopes;
}

std::string joined(const std::vector<std::string>& parts, size_t count) {
  std::string out;
  for (size_t i = 0; i < count; ++i) out += (i > 0 ? "/" : "") + parts[i];
  return out;
}

std::string megabytes(double bytes) {
  char text[32];
  std::snprintf(text, sizeof text, bytes >= 1e5 ? "%.1f MB" : "%.1f KB", bytes >= 1e5 ? bytes / 1e6 : bytes / 1e3);
  return text;
}

// What a collective sums for each of its participants: its outputs' bytes over the devices it reads from.
std::string bucket_size(const Graph& graph, const Node& node) {
  double bytes = 0;
  for (const TensorType& type : node.outputs) {
    const std::optional<int64_t> size = type.byte_size_at(1);
    if (!size || !type.shape.is_fully_defined()) return "size unknown";
    bytes += static_cast<double>(*size);
  }
  std::set<std::string> devices;
  for (const ValueRef input : node.inputs) devices.insert(device_name(graph.node(input.node)));
  return megabytes(bytes / static_cast<double>(std::max<size_t>(devices.size(), 1)));
}

// A scope cluster of a device's cluster: its nested clusters and its items.
struct Cluster {
  std::map<std::string, std::unique_ptr<Cluster>> children;
  std::vector<size_t> items;
};

// What a picture draws as one shape: a node; every node of a scope `collapse_below` deep (on one
// device); the nodes of one op directly in a shallower scope; or, collapsed, the ranks of one
// collective group on one device. A group of one node draws as the node.
struct Item {
  enum class Kind { node, scope, op };
  Kind kind = Kind::node;
  std::string id, title;  // title: the scope, or the op
  std::vector<NodeId> nodes;
};

class DotPicture {
 public:
  DotPicture(const Graph& graph, const DotOptions& options) : graph_(graph), options_(options) {}

  std::string draw() {
    for (const Node& node : graph_.nodes()) place(node);
    std::string out = "digraph mirra {\n  compound=true; rankdir=TB; newrank=true; nodesep=0.2; ranksep=0.3;\n"
                      "  node [shape=box, style=\"rounded,filled\", fontname=\"Helvetica\", fontsize=10];\n"
                      "  edge [color=\"#555555\", arrowsize=0.6, fontname=\"Helvetica\", fontsize=8];\n";
    for (const auto& [device, root] : devices_) {
      out += "  subgraph cluster_" + std::to_string(clusters_++) + " {\n    label=\"" + escaped(device) +
             "\"; style=\"rounded,bold\"; color=\"#333333\"; fontname=\"Helvetica-Bold\";\n";
      draw_cluster(*root, device, "    ", out);
      out += "  }\n";
    }
    draw_edges(out);
    return out + "}\n";
  }

 private:
  DotRole role(const Node& node) const { return options_.role ? options_.role(node) : DotRole::plain; }

  void place(const Node& node) {
    const std::string device = device_name(node);
    if (!colours_.contains(device)) colours_[device] = kDeviceColours[colours_.size() % std::size(kDeviceColours)];
    std::vector<std::string> scopes = scopes_of(node.name);
    const DotRole r = role(node);
    const bool distinct = r == DotRole::collective || r == DotRole::copy || r == DotRole::batch_split;
    const size_t depth = static_cast<size_t>(options_.collapse_below);
    Item item{.id = "n" + std::to_string(items_.size())};
    std::string key;  // empty: the node alone
    const std::string* group = r == DotRole::collective && depth > 0 ? node.attrs.get<std::string>("group") : nullptr;
    if (group != nullptr) {
      key = device + "|" + *group;
      scopes = scopes_of(*group);
    } else if (!distinct && depth > 0 && scopes.size() >= depth) {
      item.kind = Item::Kind::scope;
      item.title = joined(scopes, depth);
      key = device + "|" + item.title;
      scopes.resize(depth - 1);
    } else if (!distinct && depth > 0) {
      item.kind = Item::Kind::op;
      item.title = node.op;
      key = device + "|" + joined(scopes, scopes.size()) + "|" + node.op;
    }
    size_t index = items_.size();
    if (!key.empty()) {
      const auto [it, added] = groups_.try_emplace(key, index);
      index = it->second;
      if (added) key.clear();  // a new group: its item is made below
    }
    if (key.empty()) {
      items_.push_back(std::move(item));
      cluster_of(device, scopes).items.push_back(index);
    }
    items_[index].nodes.push_back(node.id);
    item_of_.push_back(index);
  }

  Cluster& cluster_of(const std::string& device, const std::vector<std::string>& scopes) {
    auto& root = devices_[device];
    if (!root) root = std::make_unique<Cluster>();
    Cluster* cluster = root.get();
    for (const std::string& scope : scopes) {
      auto& child = cluster->children[scope];
      if (!child) child = std::make_unique<Cluster>();
      cluster = child.get();
    }
    return *cluster;
  }

  // A box's label: the last name of its scope, its node count and its two most frequent ops.
  std::string box_label(const Item& item) const {
    std::map<std::string, int> ops;
    for (const NodeId id : item.nodes) ++ops[graph_.node(id).op];
    std::vector<std::pair<int, std::string>> by_count;
    for (const auto& [op, count] : ops) by_count.emplace_back(-count, op);
    std::sort(by_count.begin(), by_count.end());
    std::string label = escaped(item.title.substr(item.title.rfind('/') + 1)) + "\\n" + std::to_string(item.nodes.size()) + " nodes\\n";
    for (size_t i = 0; i < std::min<size_t>(2, by_count.size()); ++i) {
      label += (i == 0 ? "" : ", ") + escaped(by_count[i].second);
      if (-by_count[i].first > 1) label += " x" + std::to_string(-by_count[i].first);
    }
    if (by_count.size() > 2) label += ", ...";
    return label;
  }

  // A node's shape: by its role, filled with its device's colour unless its role has a colour.
  std::string node_attributes(DotRole r, const std::string& device) const {
    switch (r) {
      case DotRole::collective: return "shape=hexagon, style=filled, fillcolor=\"#f4a261\", penwidth=1.5";
      case DotRole::copy: return "shape=cds, style=filled, fillcolor=\"#9ecae1\"";
      case DotRole::batch_split: return "shape=invtrapezium, style=filled, fillcolor=\"#74c476\"";
      case DotRole::variable: return "shape=cylinder, style=filled, fillcolor=\"" + colours_.at(device) + "\"";
      case DotRole::plain: break;
    }
    return "fillcolor=\"" + colours_.at(device) + "\"";
  }

  void draw_cluster(const Cluster& cluster, const std::string& device, const std::string& indent, std::string& out) {
    for (const size_t i : cluster.items) {
      const Item& item = items_[i];
      const Node& first = graph_.node(item.nodes.front());
      std::string label, attributes;
      if (item.nodes.size() == 1 || item.kind == Item::Kind::node) {  // a node, or a collective's ranks
        const std::string name = first.name.substr(first.name.rfind('/') + 1);
        label = escaped(name) + (name == first.op ? "" : "\\n" + escaped(first.op));
        if (item.nodes.size() > 1) label += " x" + std::to_string(item.nodes.size());
        if (role(first) == DotRole::collective) label += "\\n" + bucket_size(graph_, first);
        attributes = node_attributes(role(first), device);
      } else if (item.kind == Item::Kind::op) {
        label = escaped(item.title) + " x" + std::to_string(item.nodes.size());
        attributes = node_attributes(role(first), device) + ", peripheries=2";
      } else {
        label = box_label(item);
        attributes = "shape=box3d, style=filled, fillcolor=\"" + colours_.at(device) + "\"";
      }
      out += indent + item.id + " [label=\"" + label + "\", " + attributes + "];\n";
    }
    for (const auto& [scope, child] : cluster.children) {
      out += indent + "subgraph cluster_" + std::to_string(clusters_++) + " {\n" + indent + "  label=\"" + escaped(scope) +
             "\"; style=\"rounded,dashed\"; color=\"#999999\";\n";
      draw_cluster(*child, device, indent + "  ", out);
      out += indent + "}\n";
    }
  }

  void draw_edges(std::string& out) const {
    std::set<std::pair<size_t, size_t>> drawn;
    for (const Node& node : graph_.nodes()) {
      const size_t to = item_of_[node.id];
      for (const ValueRef input : node.inputs) {
        const size_t from = item_of_[input.node];
        if (from == to || !drawn.insert({from, to}).second) continue;
        const bool single = items_[from].nodes.size() == 1 && items_[to].nodes.size() == 1;
        out += "  " + items_[from].id + " -> " + items_[to].id +
               (single && options_.collapse_below == 0 ? " [label=\"" + escaped(graph_.type(input).to_string()) + "\"]" : "") +
               ";\n";
      }
      for (const NodeId control : node.control_inputs) {
        const size_t from = item_of_[control];
        if (from == to || !drawn.insert({from, to}).second) continue;
        out += "  " + items_[from].id + " -> " + items_[to].id + " [style=dashed];\n";
      }
    }
  }

  const Graph& graph_;
  const DotOptions options_;
  std::vector<Item> items_;
  std::vector<size_t> item_of_;          // by node id
  std::map<std::string, size_t> groups_;  // "device|scope" or "device|scope|op" -> item
  std::map<std::string, std::unique_ptr<Cluster>> devices_;
  std::map<std::string, std::string> colours_;
  int clusters_ = 0;
};

}  // namespace

std::string to_dot(const Graph& graph, const DotOptions& options) { return DotPicture(graph, options).draw(); }

}  // namespace mirra::graph
