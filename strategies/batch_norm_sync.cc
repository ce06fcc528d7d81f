// synchronise_batch_norm: each replica's batch normalisation in training mode normalises with the
// statistics of the whole batch, across every replica (and worker), in forward and backward, so that
// N replicas compute what one device computes on the batch (TensorFlow's SyncBatchNormalization,
// PyTorch's SyncBatchNorm).
//
// Forward, per layer, two all-reduces: of each replica's per-channel sums and value count, giving the
// mean, then of its squared deviations from that mean, giving the biased variance. Two passes, so a
// large mean costs no precision (a sum of squares minus the squared mean would lose it; the CPU kernel
// sweeps once, from a shift it samples, which replicas would have to agree on). Each replica's
// FusedBatchNormV3 becomes a SyncFusedBatchNorm given those statistics (its inference mode is
// FusedBatchNormV3's: evaluation still uses the moving statistics); a FusedBatchNormEx keeps its side
// input and activation in it.
//
// Backward, per layer, one all-reduce: each replica's FusedBatchNormGradV3 runs in inference mode
// (dx = scale * inv * dy with the global statistics, dscale and doffset its own sums, which the
// gradients' aggregation adds up as for any variable), and the all-reduced sums of dy and of
// dy * (x - mean) * inv give the rest of dx: dx -= scale * inv / N * (sum dy + (x - mean) * inv *
// sum dy (x - mean) inv).
#include <algorithm>

#include "ops/ops.h"
#include "strategies/replicate_passes.h"

namespace mirra::strategies {

namespace {

using graph::DType;
using graph::Node;
using graph::NodeId;
using graph::ValueRef;

struct Layer {
  int rank = 4, channel = 3;
  std::vector<int64_t> axes;  // every dim but the channel dim
  // A per-channel vector as it broadcasts against x: itself when the channels are last, else
  // [C, 1, ...].
  ValueRef per_channel(graph::Builder& b, ValueRef v, int64_t channels) const {
    if (channel == rank - 1) return v;
    std::vector<int64_t> shape(static_cast<size_t>(rank - channel), 1);
    shape[0] = channels;
    return ops::reshape(b, v, shape);
  }
};

// The values each replica's clone of `node` reads, by replica.
std::vector<std::vector<ValueRef>> clone_inputs(const ReplicaGraph& r, NodeId id) {
  std::vector<std::vector<ValueRef>> inputs;
  for (NodeId clone : r.copies[id]) inputs.push_back(r.graph.node(clone).inputs);
  return inputs;
}

// Every (node, input index) of the graph reading `value`.
std::vector<std::pair<NodeId, size_t>> readers(const graph::Graph& g, ValueRef value) {
  std::vector<std::pair<NodeId, size_t>> found;
  for (const Node& node : g.nodes()) {
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      if (node.inputs[i] == value) found.emplace_back(node.id, i);
    }
  }
  return found;
}

// One all-reduce (sum) `base` over the replicas of `per_replica[r]` (k tensors each): result[r][j].
// Not chained: a layer's forward and backward sums stand on either side of the later layers'.
std::vector<std::vector<ValueRef>> summed(ReplicaGraph& r, std::string_view base, const std::vector<std::vector<ValueRef>>& per_replica) {
  return r.all_reduce_on_host(base, per_replica, "sum", nullptr);
}

// A batch normalisation the pass synchronises: FusedBatchNormV3, or the FusedBatchNormEx the fusion
// passes made of one (its gradient a FusedBatchNormGradEx).
bool is_batch_norm(const Node& node) { return node.op == "FusedBatchNormV3" || node.op == "FusedBatchNormEx"; }

// What a FusedBatchNormEx adds and applies after normalising, reading a replica's `inputs`.
ops::BatchNormEpilogue epilogue(const Node& original, const std::vector<ValueRef>& inputs) {
  if (original.op != "FusedBatchNormEx") return {};
  return {.side_input = inputs.size() > 5 ? inputs[5] : ValueRef{},
          .activation = graph::checked_attr<std::string>(original, "activation")};
}

graph::Status synchronise_layer(ReplicaGraph& r, const Node& original) {
  graph::Builder& b = r.builder;
  const graph::TensorType x_type = r.program.graph.type(original.inputs[0]);
  if (x_type.dtype != DType::f32 && x_type.dtype != DType::f64) {
    return graph::unimplemented("sync_batch_norm: '" + original.name + "' normalises " + x_type.to_string() +
                                "; synchronised batch normalisation takes f32 and f64 activations so far");
  }
  const std::string& format = graph::checked_attr<std::string>(original, "data_format");
  Layer layer{.rank = x_type.shape.rank(), .channel = format == "NCHW" || format == "NCDHW" ? 1 : x_type.shape.rank() - 1};
  for (int d = 0; d < layer.rank; ++d) {
    if (d != layer.channel) layer.axes.push_back(d);
  }
  const int64_t channels = x_type.shape.dim(layer.channel);
  const double epsilon = graph::checked_attr<double>(original, "epsilon");
  const std::vector<std::vector<ValueRef>> inputs = clone_inputs(r, original.id);
  const int replicas = static_cast<int>(inputs.size());
  auto scope = b.scope("sync_batch_norm/" + original.name);
  const auto on = [&](int replica, ValueRef v) { return r.on(replica, v); };

  // The mean: sums and counts of every replica.
  std::vector<std::vector<ValueRef>> sums(static_cast<size_t>(replicas));
  for (int k = 0; k < replicas; ++k) {
    // The values per channel: the known dims' product times each unknown dim (the batch's share).
    const ValueRef x = inputs[static_cast<size_t>(k)][0];
    double known = 1;
    for (int64_t axis : layer.axes) known *= static_cast<double>(std::max<int64_t>(x_type.shape.dim(static_cast<int>(axis)), 1));
    ValueRef count = on(k, ops::scalar_of(b, known, x));
    for (int64_t axis : layer.axes) {
      if (x_type.shape.dim(static_cast<int>(axis)) >= 0) continue;
      count = on(k, ops::mul(b, count, on(k, ops::cast(b, on(k, ops::dim_size(b, x, axis)), x_type.dtype))));
    }
    sums[static_cast<size_t>(k)] = {on(k, ops::reduce_sum(b, x, layer.axes)), count};
  }
  const std::vector<std::vector<ValueRef>> totals = summed(r, "sums", sums);
  MIRRA_RETURN_IF_ERROR(b.status());
  std::vector<ValueRef> mean(static_cast<size_t>(replicas)), count(mean.size());
  std::vector<std::vector<ValueRef>> squares(mean.size());
  for (int k = 0; k < replicas; ++k) {
    const size_t s = static_cast<size_t>(k);
    count[s] = totals[s][1];
    mean[s] = on(k, ops::div(b, totals[s][0], count[s]));
    const ValueRef deviation = on(k, ops::sub(b, inputs[s][0], on(k, layer.per_channel(b, mean[s], channels))));
    squares[s] = {on(k, ops::reduce_sum(b, on(k, ops::square(b, deviation)), layer.axes))};
  }
  // The biased variance: the squared deviations from the batch's mean.
  const std::vector<std::vector<ValueRef>> square_totals = summed(r, "squares", squares);
  MIRRA_RETURN_IF_ERROR(b.status());
  const ops::BatchNormOptions options{.epsilon = epsilon,
                                      .exponential_avg_factor = graph::checked_attr<double>(original, "exponential_avg_factor"),
                                      .data_format = format,
                                      .is_training = true};
  std::vector<ValueRef> variance(mean.size());
  std::vector<NodeId> synchronised(mean.size());
  for (int k = 0; k < replicas; ++k) {
    const size_t s = static_cast<size_t>(k);
    variance[s] = on(k, ops::div(b, square_totals[s][0], count[s]));
    const std::vector<ValueRef>& in = inputs[s];
    const ops::BatchNorm bn =
        ops::sync_fused_batch_norm(b, in[0], in[1], in[2], in[3], in[4], mean[s], variance[s], count[s], options, epilogue(original, in));
    MIRRA_RETURN_IF_ERROR(b.status());
    on(k, bn.y);
    synchronised[s] = bn.y.node;
    // Whatever read the clone, and the passes after this one, read the synchronised node.
    const NodeId clone = r.copies[original.id][s];
    for (uint16_t output = 0; output < 6; ++output) r.graph.replace_all_uses({clone, output}, {bn.y.node, output});
    r.graph.mutable_node(bn.y.node).control_inputs = r.graph.node(clone).control_inputs;
    for (NodeId id = 0; id < r.graph.size(); ++id) {
      for (NodeId& control : r.graph.mutable_node(id).control_inputs) {
        if (control == clone) control = bn.y.node;
      }
    }
    r.copies[original.id][s] = bn.y.node;
  }

  // Backward: the gradient nodes reading a replica's statistics (its reserve spaces).
  std::vector<NodeId> grads(static_cast<size_t>(replicas), graph::kInvalidNode);
  for (const Node& node : r.graph.nodes()) {
    if (node.op != "FusedBatchNormGradV3" && node.op != "FusedBatchNormGradEx") continue;
    for (size_t k = 0; k < grads.size(); ++k) {
      if (node.inputs[4] == ValueRef{synchronised[k], 4}) grads[k] = node.id;
    }
  }
  const auto missing = [](NodeId id) { return id == graph::kInvalidNode; };
  if (std::all_of(grads.begin(), grads.end(), missing)) return graph::Status();  // not differentiated
  if (std::any_of(grads.begin(), grads.end(), missing)) {
    return graph::internal_error("sync_batch_norm: '" + original.name + "' has a gradient on some replicas only");
  }
  std::vector<std::vector<std::pair<NodeId, size_t>>> dx_readers;
  std::vector<std::vector<ValueRef>> local(static_cast<size_t>(replicas));
  for (int k = 0; k < replicas; ++k) {
    const size_t s = static_cast<size_t>(k);
    r.graph.mutable_node(grads[s]).attrs.set("is_training", false);  // dx = scale * inv * dy; its own sums
    dx_readers.push_back(readers(r.graph, {grads[s], 0}));
    local[s] = {ValueRef{grads[s], 2}, ValueRef{grads[s], 1}};  // sum dy, sum dy (x - mean) inv
  }
  const std::vector<std::vector<ValueRef>> grad_totals = summed(r, "gradient_sums", local);
  MIRRA_RETURN_IF_ERROR(b.status());
  for (int k = 0; k < replicas; ++k) {
    const size_t s = static_cast<size_t>(k);
    const Node& grad = r.graph.node(grads[s]);
    const ValueRef scale = grad.inputs[2];
    const ValueRef inv = on(k, ops::rsqrt(b, on(k, ops::add(b, variance[s], on(k, ops::scalar_of(b, epsilon, variance[s]))))));
    const ValueRef factor = on(k, ops::div(b, on(k, ops::mul(b, scale, inv)), count[s]));
    const ValueRef slope = on(k, ops::mul(b, inv, grad_totals[s][1]));
    // x - mean again, not kept from the forward pass: it would hold a copy of x until now.
    const ValueRef deviation = on(k, ops::sub(b, inputs[s][0], on(k, layer.per_channel(b, mean[s], channels))));
    // One node per statement: the order of a call's arguments would otherwise name the nodes.
    const ValueRef spread_slope = on(k, layer.per_channel(b, slope, channels));
    const ValueRef slope_term = on(k, ops::mul(b, deviation, spread_slope));
    const ValueRef spread_totals = on(k, layer.per_channel(b, grad_totals[s][0], channels));
    const ValueRef correction = on(k, ops::add(b, spread_totals, slope_term));
    const ValueRef dx = on(k, ops::sub(b, ValueRef{grads[s], 0},
                                       on(k, ops::mul(b, on(k, layer.per_channel(b, factor, channels)), correction))));
    MIRRA_RETURN_IF_ERROR(b.status());
    for (const auto& [reader, input] : dx_readers[s]) r.graph.mutable_node(reader).inputs[input] = dx;
  }
  return graph::Status();
}

}  // namespace

graph::Status synchronise_batch_norm(ReplicaGraph& r) {
  if (r.replicas == 1 && !r.plan.across_workers) return graph::Status();  // one replica's statistics are the batch's
  for (NodeId id : r.order) {
    const Node& node = r.program.graph.node(id);
    if (!is_batch_norm(node) || !r.classification.replicated[id]) continue;
    if (!graph::checked_attr<bool>(node, "is_training")) continue;
    MIRRA_RETURN_IF_ERROR(synchronise_layer(r, node));
  }
  return graph::Status();
}

}  // namespace mirra::strategies
