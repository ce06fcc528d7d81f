// OpSchema: what the graph knows of an op: its inputs, attributes (with types and defaults), traits,
// and the rule that infers its outputs' dtypes and shapes. check_and_infer applies a schema to a node:
// arity, attribute names and types, defaults, then inference; errors name the node and its inputs.
#pragma once

#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "graph/check.h"
#include "graph/node.h"
#include "graph/status.h"

namespace mirra::graph {

enum OpTrait : uint32_t {
  // Reduces over `axes` (absent: all, as an empty list meant in model files of format version 1).
  kReduction = 1u << 1,
  // Spans the replicas or workers (its kernel calls a collective): the runner agrees on these across
  // workers, and the trace draws them on the communication track.
  kCollective = 1u << 3,
  // Its output may be an input's buffer, or a view of it, even while others read that input
  // (Identity, Reshape): whoever reads the output reads the input. An op that only takes over a
  // buffer nobody else holds (a collective working in place) does not have it.
  kForwardsInput = 1u << 5,
};

struct AttrSpec {
  std::string name;
  AttrType type;
  std::optional<AttrValue> default_value;  // none: the attribute is required, unless optional
  bool optional = false;  // may be absent, which means something of its own (no default is filled in)
};

// What an inference rule sees: the node (name and attributes, defaults filled in) and input types.
class InferContext {
 public:
  InferContext(const Node& node, std::span<const TensorType> inputs) : node_(node), inputs_(inputs) {}

  const Node& node() const { return node_; }
  size_t num_inputs() const { return inputs_.size(); }
  const TensorType& input(size_t i) const { return inputs_[i]; }
  std::span<const TensorType> inputs() const { return inputs_; }
  // Attributes are present and typed once check_and_infer has run, so these never fail.
  template <class T>
  const T& attr(std::string_view name) const;
  // invalid_argument naming the node, its op and its input types.
  Status error(std::string_view message) const;

 private:
  const Node& node_;
  std::span<const TensorType> inputs_;
};

using InferFn = std::function<Expected<std::vector<TensorType>>(const InferContext&)>;

class Builder;

// What a gradient rule sees: the builder to add nodes with, a copy of the node (the graph may grow
// while the rule runs), its inputs and outputs, and the gradient of each output (invalid: zero).
struct GradientContext {
  Builder& builder;
  Node node;
  std::vector<ValueRef> outputs;
  std::vector<ValueRef> output_grads;
  std::vector<TensorType> input_types;
  std::vector<bool> needed;  // per input: does anything differentiated depend on it?

  ValueRef input(size_t i) const { return node.inputs[i]; }
  // Rules may skip the gradients of inputs that are not needed (a model's input images, say): a
  // gradient node nobody uses still reads the op's other inputs, so building it costs a step time.
  bool needs(size_t i) const { return i < needed.size() && needed[i]; }
  ValueRef output(size_t i) const { return outputs[i]; }
  ValueRef grad(size_t i) const { return output_grads[i]; }
  template <class T>
  const T& attr(std::string_view name) const;
};

// Builds the gradient of each input from the gradients of the outputs; an invalid ValueRef means no
// gradient for that input. Errors go to the builder's status.
using GradientFn = std::function<std::vector<ValueRef>(GradientContext&)>;

// What one execution of a node costs, for roofline estimates of its time (mirra simulate): the
// floating-point operations it performs (a multiply-add is two) and the bytes of memory it reads and
// writes.
struct OpCost {
  double flops = 0;
  double bytes = 0;
};

// What a cost rule sees: the node, and its inputs' and outputs' types with the batch's dims bound.
struct CostContext {
  const Node& node;
  std::span<const TensorType> inputs;
  std::span<const TensorType> outputs;

  // Elements and bytes of a type, unknown dims counted as none.
  static double elements(const TensorType& type);
  static double bytes(const TensorType& type);
  // Every input read once and every output written once.
  double bytes_moved() const;
};

using CostFn = std::function<OpCost(const CostContext&)>;

struct OpSchema {
  std::string name;
  std::vector<std::string> inputs;  // names, for messages and docs
  bool variadic = false;            // the last input repeats (at least once)
  size_t optional_inputs = 0;       // the last n inputs may be left out (not with variadic)
  std::vector<AttrSpec> attrs;
  uint32_t traits = 0;
  // What graph passes ask of an op, declared here rather than listed by op name in each pass:
  // - the inputs whose buffers the kernel writes in place (a Variable's value: the optimizer updates,
  //   Assign); ops::minimize orders each such node after every reader of that variable;
  std::vector<size_t> updates;
  // - of an update, the input it applies to its variable: the gradient a strategy aggregates;
  std::optional<size_t> update_gradient;
  // - how many leading inputs are the operands of a product (16-bit operands summed in f32): the
  //   mixed-precision pass casts them;
  size_t product_operands = 0;
  // - of a convolution, the input holding its filter ([h, w, in, out]): the mixed-precision pass reads
  //   its channel counts;
  std::optional<size_t> filter_input;
  // - the inputs whose values output 0 holds unchanged (picked, rearranged or viewed), exact in any
  //   dtype: a 16-bit value passes through;
  std::vector<size_t> moves_values;
  // - the inputs of which the kernel reads only the shape, and whose dtype no output takes.
  std::vector<size_t> reads_only_shape;
  // - the boolean attribute under which the op computes as in training (FusedBatchNormV3's
  //   is_training: the batch's statistics), or empty: evaluation computes with it false
  //   (ops/inference_mode.h).
  std::string training_attr;
  InferFn infer;
  // What an execution costs (op_cost). None: an element-wise op's cost, one operation per output
  // element with every input read and every output written once; products, convolutions and
  // attention state their own, sources and views that move no bytes state zero.
  CostFn cost;
  std::string summary;
  // Exactly one of these: the op's gradient rule, or why it has none (it outputs integers or
  // constants, say). Differentiating through an op with no gradient is an error that names it.
  GradientFn gradient;
  std::string no_gradient;

  bool has(OpTrait trait) const { return (traits & trait) != 0; }
  bool updates_input(size_t i) const { return contains(updates, i); }
  bool moves_values_of(size_t i) const { return contains(moves_values, i); }
  bool reads_only_shape_of(size_t i) const { return contains(reads_only_shape, i); }

 private:
  static bool contains(const std::vector<size_t>& inputs, size_t i) {
    for (size_t input : inputs) {
      if (input == i) return true;
    }
    return false;
  }
};

// The cost of one execution of a node of `schema` (its rule, or the element-wise default).
OpCost op_cost(const OpSchema& schema, const CostContext& context);
// The cost rule of sources and views (a Variable's value, a reshape): no operations, no bytes moved.
OpCost costs_nothing(const CostContext& context);
// A product's cost: 2 flops per multiply-add, its operands read and its outputs written once.
OpCost product_cost(const CostContext& context, double multiply_adds);

// Checks `node` (op, inputs, attrs) against `schema`, fills in default attributes, and returns the
// inferred output types. `inputs` are the types of node.inputs.
Expected<std::vector<TensorType>> check_and_infer(const OpSchema& schema, Node& node,
                                                  std::span<const TensorType> inputs);

// The attribute `name` of a node that passed check_and_infer, where it is present with its type.
template <class T>
const T& checked_attr(const Node& node, std::string_view name) {
  const T* value = node.attrs.get<T>(name);
  MIRRA_CHECK(value != nullptr, node.name + ": attribute '" + std::string(name) + "' missing or mistyped");
  return *value;
}

template <class T>
const T& InferContext::attr(std::string_view name) const {
  return checked_attr<T>(node_, name);
}

}  // namespace mirra::graph

namespace mirra::graph {

template <class T>
const T& GradientContext::attr(std::string_view name) const {
  return checked_attr<T>(node, name);
}

}  // namespace mirra::graph
