// update_looked_up_rows: the gradient of each update traced back to the rows its lookups scatter, and
// the update replaced by its row-wise op over them.
#include "ops/sparse_updates.h"

#include <optional>
#include <string>
#include <vector>

#include "graph/builder.h"
#include "ops/array_ops.h"
#include "ops/check_numerics_ops.h"
#include "ops/elementwise_ops.h"
#include "ops/sparse_optimizer_ops.h"

namespace mirra::ops {

namespace {

using graph::Graph;
using graph::Node;
using graph::NodeId;
using graph::TensorType;
using graph::ValueRef;

// One scatter a gradient sums: its rows and indices, and the nodes between it and the gradient that
// the rows pass through too (Identity, CheckNumerics, Mul or Div by a scalar), the scatter's end first.
struct Term {
  ValueRef rows, indices;
  std::vector<NodeId> through;
};

bool is_scalar(const Graph& g, ValueRef value) { return g.type(value).shape.rank() == 0; }

// The scatters `value` (of the variable's type) sums, or nullopt when it is anything else.
std::optional<std::vector<Term>> terms_of(const Graph& g, ValueRef value, const TensorType& variable, int depth = 0) {
  const Node& node = g.node(value.node);
  if (value.output != 0 || g.type(value) != variable || depth > 64) return std::nullopt;
  if (node.op == "UnsortedSegmentSum") {
    if (variable.shape.rank() < 1 || graph::checked_attr<int64_t>(node, "num_segments") != variable.shape.dim(0)) return std::nullopt;
    return std::vector<Term>{{node.inputs[0], node.inputs[1], {}}};
  }
  std::vector<ValueRef> summed;
  if (node.op == "Add" || node.op == "AddN") summed = node.inputs;
  if (node.op == "Identity" || node.op == "CheckNumerics") summed = {node.inputs[0]};
  if (node.op == "Mul" && is_scalar(g, node.inputs[0]) != is_scalar(g, node.inputs[1])) {
    summed = {is_scalar(g, node.inputs[0]) ? node.inputs[1] : node.inputs[0]};
  }
  if (node.op == "Div" && is_scalar(g, node.inputs[1])) summed = {node.inputs[0]};
  if (summed.empty()) return std::nullopt;
  std::vector<Term> terms;
  for (ValueRef input : summed) {
    std::optional<std::vector<Term>> inner = terms_of(g, input, variable, depth + 1);
    if (!inner) return std::nullopt;
    terms.insert(terms.end(), inner->begin(), inner->end());
  }
  if (summed.size() == 1) {
    for (Term& term : terms) term.through.push_back(node.id);
  }
  return terms;
}

// Whether the variable's value is read by lookups of its rows alone (GatherV2 along axis 0, of it or
// of an Identity of it), besides its updates: an embedding table.
bool read_by_lookups_alone(const Graph& g, const graph::OpRegistry& schemas, NodeId variable,
                           const std::vector<std::vector<NodeId>>& consumers, int depth = 0) {
  if (depth > 16) return false;
  bool looked_up = false;
  for (NodeId reader : consumers[variable]) {
    const Node& node = g.node(reader);
    const graph::OpSchema* schema = schemas.find(node.op);
    if (schema != nullptr && !schema->updates.empty() && node.inputs[0].node == variable) continue;
    if (node.op == "Identity") {
      if (!read_by_lookups_alone(g, schemas, reader, consumers, depth + 1)) return false;
      looked_up = true;
      continue;
    }
    if (node.op != "GatherV2" || node.inputs[0].node != variable || graph::checked_attr<int64_t>(node, "axis") != 0) return false;
    looked_up = true;
  }
  return looked_up;
}

// The term's rows through what its scatter passed through.
ValueRef rows_through(graph::Builder& b, const Term& term) {
  ValueRef rows = term.rows;
  for (NodeId id : term.through) {
    const Node node = b.graph().node(id);  // a copy: adding nodes may move the graph's
    if (node.op == "CheckNumerics") {
      rows = check_numerics(b, rows, graph::checked_attr<std::string>(node, "message"));
    } else if (node.op == "Mul") {
      rows = is_scalar(b.graph(), node.inputs[0]) ? mul(b, node.inputs[0], rows) : mul(b, rows, node.inputs[1]);
    } else if (node.op == "Div") {
      rows = div(b, rows, node.inputs[1]);
    }
  }
  return rows;
}

// The terms' rows and indices as one sparse gradient: the terms' own, or all of them concatenated in
// order (so each index's rows add up in the order the sum added them), indices as i64 where they differ.
SparseGradient gradient_of(graph::Builder& b, const std::vector<Term>& terms, const TensorType& variable) {
  if (terms.size() == 1) return {rows_through(b, terms[0]), terms[0].indices};
  bool same_dtype = true;
  for (const Term& term : terms) same_dtype = same_dtype && b.type(term.indices).dtype == b.type(terms[0].indices).dtype;
  std::vector<int64_t> row_shape = {-1};
  row_shape.insert(row_shape.end(), variable.shape.dims.begin() + 1, variable.shape.dims.end());
  std::vector<ValueRef> rows, indices;
  for (const Term& term : terms) {
    rows.push_back(reshape(b, rows_through(b, term), row_shape));
    const ValueRef flat = reshape(b, term.indices, {-1});
    indices.push_back(same_dtype ? flat : cast(b, flat, graph::DType::i64));
  }
  return {concat(b, rows, 0), concat(b, indices, 0)};
}

// The row-wise op of `update` over `gradient`, with its other inputs and attributes.
NodeId sparse_update(graph::Builder& b, const Node& update, const SparseGradient& gradient) {
  const std::vector<ValueRef>& in = update.inputs;
  const auto gate = [&](size_t at) { return in.size() > at ? in[at] : ValueRef{}; };
  if (update.op == "ApplyGradientDescent") return sparse_apply_gradient_descent(b, in[0], gradient, in[2], gate(3));
  if (update.op == "ApplyMomentum") {
    return sparse_apply_momentum(b, in[0], in[1], gradient, in[3], graph::checked_attr<double>(update, "momentum"),
                                 graph::checked_attr<bool>(update, "use_nesterov"), gate(4));
  }
  return sparse_apply_adam(b, {.variable = in[0], .m = in[1], .v = in[2], .gradient = gradient, .learning_rate = in[4], .step = in[5]},
                           graph::checked_attr<double>(update, "beta1"), graph::checked_attr<double>(update, "beta2"),
                           graph::checked_attr<double>(update, "epsilon"), gate(6));
}

// Whether this pass makes `node` row-wise where it can: a dense update with a row-wise op.
bool has_row_wise_op(const Node& node) {
  return node.op == "ApplyGradientDescent" || node.op == "ApplyMomentum" || node.op == "ApplyAdam";
}

}  // namespace

graph::Status update_looked_up_rows(Graph& g, const graph::OpRegistry& schemas) {
  graph::Builder b(g, schemas);
  const NodeId original = static_cast<NodeId>(g.size());
  const std::vector<std::vector<NodeId>> consumers = g.consumers();
  for (NodeId id = 0; id < original; ++id) {
    const Node update = g.node(id);  // a copy: adding nodes may move the graph's
    if (!has_row_wise_op(update)) continue;
    const std::optional<size_t> at = schemas.find(update.op)->update_gradient;
    const bool lazy = update.op != "ApplyGradientDescent" && graph::checked_attr<bool>(update, "lazy");
    if (update.op != "ApplyGradientDescent" && !lazy) continue;
    const TensorType variable = g.type(update.inputs[0]);
    const ValueRef gradient = update.inputs[*at];
    const std::string named = "the lazy update of '" + g.node(update.inputs[0].node).name + "'";
    const std::optional<std::vector<Term>> terms = terms_of(g, gradient, variable);
    const bool on_cpu = !update.device || update.device->kind == graph::DeviceKind::cpu;
    const bool decays = graph::checked_attr<double>(update, "weight_decay") != 0;
    if (!terms || !on_cpu || decays) {
      if (!lazy || !read_by_lookups_alone(g, schemas, update.inputs[0].node, consumers)) continue;
      if (decays) return graph::invalid_argument(named + " decays every row (exclude it from weight decay, or train it not lazily)");
      if (!on_cpu) return graph::unimplemented(named + " runs on the CPU only, not on " + update.device->to_string());
      return graph::invalid_argument(named + " needs the rows its lookups' gradient scatters, but its gradient is " +
                                     g.node(gradient.node).op + " '" + g.node(gradient.node).name +
                                     "' (a strategy that all-reduces gradients sums them whole; central_storage and "
                                     "parameter_server update by rows)");
    }
    b.set_device(update.device);
    const SparseGradient rows = gradient_of(b, *terms, variable);
    const NodeId replacement = sparse_update(b, update, rows);
    MIRRA_RETURN_IF_ERROR(b.status());
    for (NodeId control : update.control_inputs) g.add_control_edge(control, replacement);
    for (NodeId reader : consumers[id]) {  // an update has no outputs: only control edges read it
      for (NodeId& control : g.mutable_node(reader).control_inputs) {
        if (control == id) control = replacement;
      }
    }
  }
  return b.status();
}

}  // namespace mirra::ops
