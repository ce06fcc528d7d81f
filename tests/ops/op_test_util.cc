// Kernel test helpers.
#include "tests/ops/op_test_util.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <string_view>

#include "ops/cpu/dtype_dispatch.h"
#include "ops/elementwise_math.h"

namespace mirra::test {

std::set<std::string>& checked_ops() {
  static std::set<std::string> ops;
  return ops;
}

const std::vector<graph::DeviceKind>& backends_under_test() {
  static const std::vector<graph::DeviceKind> kinds = [] {
    const char* chosen = std::getenv("MIRRA_CONFORMANCE_BACKENDS");
    std::vector<graph::DeviceKind> out;
    std::string_view rest = chosen != nullptr ? chosen : "cpu_async";
    while (!rest.empty()) {
      const std::string_view name = rest.substr(0, rest.find(','));
      rest.remove_prefix(std::min(rest.size(), name.size() + 1));
      const auto id = graph::DeviceId::parse(name);
      MIRRA_CHECK(id.ok(), "MIRRA_CONFORMANCE_BACKENDS: " + id.status().message());
      out.push_back(id->kind);
    }
    return out;
  }();
  return kinds;
}

runtime::SessionOptions backend_session_options(graph::DeviceKind kind) {
  return {.default_device = {kind, 0}, .soft_placement = true};
}

bool has_kernel(graph::DeviceKind kind, const std::string& op) { return ops::kernels().find(op, kind) != nullptr; }

std::set<std::string>& conformance_checked(graph::DeviceKind kind) {
  static std::map<graph::DeviceKind, std::set<std::string>> checked;
  return checked[kind];
}

std::set<std::string>& conformance_ran(graph::DeviceKind kind) {
  static std::map<graph::DeviceKind, std::set<std::string>> ran;
  return ran[kind];
}

std::set<std::string>& conformance_fell_back(graph::DeviceKind kind) {
  static std::map<graph::DeviceKind, std::set<std::string>> fell_back;
  return fell_back[kind];
}

void check_elements(const Tensor& got, const Tensor& want, double tolerance) {
  REQUIRE(got.type_string() == want.type_string());
  const bool exact = !graph::is_floating(want.dtype());
  for (int64_t i = 0; i < want.num_elements(); ++i) {
    const double g = element(got, i), w = element(want, i);
    const bool equal = exact || std::isinf(w) || std::isnan(w) ? (g == w || (std::isnan(g) && std::isnan(w)))
                                                                : std::abs(g - w) <= tolerance * std::max(1.0, std::abs(w));
    if (!equal) FAIL("element " << i << ": got " << g << ", want " << w);
  }
}

namespace {

// An op whose output is an input's memory (a view or the buffer itself) must carry kForwardsInput:
// minimize orders a variable's update after every reader of its buffer by that trait.
void check_forwarding(const std::string& op, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs) {
  const graph::OpSchema* schema = ops::registry().find(op);
  REQUIRE(schema != nullptr);
  if (schema->has(graph::kForwardsInput)) return;
  for (const Tensor& out : outputs) {
    for (const Tensor& in : inputs) {
      if (out.byte_size() == 0 || in.byte_size() == 0) continue;
      const auto* o = static_cast<const char*>(out.raw_data());
      const auto* i = static_cast<const char*>(in.raw_data());
      if (o < i + in.byte_size() && i < o + out.byte_size()) {
        FAIL(op << " returns its input's memory but its schema lacks the kForwardsInput trait");
      }
    }
  }
}

// What `op`'s schema declares of it holds on this case (`outputs` from the CPU kernel): output 0
// holds only values of each input it moves values of; zeros in place of an input it reads only the
// shape of change nothing; the inputs it writes in place are Variables here (as a graph gives them).
void check_declared_properties(const std::string& op, const std::vector<Tensor>& inputs, const AttrMap& attrs,
                               const std::vector<Tensor>& outputs, size_t variables) {
  const graph::OpSchema& schema = *ops::registry().find(op);
  for (size_t i : schema.updates) {
    REQUIRE_MESSAGE(i < variables, op << " writes input " << i << " in place: the case must hold it in a Variable");
  }
  for (size_t i : schema.moves_values) {
    std::set<double> values;
    for (int64_t k = 0; k < inputs[i].num_elements(); ++k) values.insert(element(inputs[i], k));
    for (int64_t k = 0; k < outputs[0].num_elements(); ++k) {
      if (values.count(element(outputs[0], k)) == 0) FAIL(op << "'s output 0 holds " << element(outputs[0], k)
                                                            << ", no value of input " << i << ", which it moves values of");
    }
  }
  for (size_t i : schema.reads_only_shape) {
    std::vector<Tensor> zeroed = inputs;
    zeroed[i] = make_tensor(inputs[i].dtype(), inputs[i].shape(), [](int64_t) { return 0.0; });
    auto again = run_op(op, zeroed, attrs, false, {}, variables);
    REQUIRE_MESSAGE(again.ok(), again.status().to_string());
    CAPTURE(i);
    for (size_t k = 0; k < outputs.size(); ++k) check_elements((*again)[k], outputs[k], 0);
  }
}

}  // namespace

void check_conformance(graph::DeviceKind kind, const std::string& what, const std::vector<Tensor>& got,
                       const std::vector<Tensor>& want, double tolerance) {
  CAPTURE(graph::device_kind_name(kind));
  REQUIRE(got.size() == want.size());
  for (size_t k = 0; k < want.size(); ++k) {
    CAPTURE(k);
    check_elements(got[k], want[k], tolerance);
  }
  conformance_checked(kind).insert(what);
}

namespace {

// The node run_op runs: `op` reading placeholders "in<i>" (or, for the first `variables`, Variables
// "in<i>") of the given types. Returns the node, or the builder's error.
graph::Expected<graph::NodeId> add_op_node(graph::Builder& b, const std::string& op,
                                           const std::vector<graph::TensorType>& inputs, const AttrMap& attrs,
                                           size_t variables) {
  std::vector<graph::ValueRef> values;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::string name = "in" + std::to_string(i);
    values.push_back(i < variables ? ops::variable(b, name, inputs[i].shape, ops::Initializer::zeros(), inputs[i].dtype,
                                                   /*trainable=*/false)
                                   : ops::placeholder(b, name, inputs[i].dtype, inputs[i].shape));
  }
  const graph::NodeId id = b.add({.op = op, .inputs = values, .attrs = attrs});
  if (!b.status().ok()) return b.status();
  return id;
}

}  // namespace

graph::Expected<std::vector<Tensor>> run_op(const std::string& op, const std::vector<Tensor>& inputs,
                                            const AttrMap& attrs, bool unknown_batch, graph::DeviceId device,
                                            size_t variables, graph::DeviceKind* placed) {
  graph::Graph g;
  graph::Builder b(g, ops::registry());
  std::vector<graph::TensorType> types;
  runtime::Feeds feeds;
  for (size_t i = 0; i < inputs.size(); ++i) {
    std::vector<int64_t> dims = inputs[i].shape().to_vector();
    if (unknown_batch && i == 0 && i >= variables && !dims.empty()) dims[0] = -1;
    types.push_back({inputs[i].dtype(), graph::Shape(dims)});
    if (i >= variables) feeds["in" + std::to_string(i)] = inputs[i];
  }
  MIRRA_ASSIGN_OR_RETURN(const graph::NodeId id, add_op_node(b, op, types, attrs, variables));
  std::vector<graph::ValueRef> fetches;
  for (uint16_t i = 0; i < g.node(id).outputs.size(); ++i) fetches.push_back({id, i});
  runtime::Session session(g, ops::kernels(), backend_session_options(device.kind));
  for (size_t i = 0; i < variables; ++i) session.assign_variable("in" + std::to_string(i), inputs[i]);
  const graph::NodeId targets[] = {id};
  MIRRA_ASSIGN_OR_RETURN(std::vector<Tensor> outputs, session.run(feeds, fetches, targets));
  for (size_t i = 0; i < variables; ++i) outputs.push_back(*session.read_variable("in" + std::to_string(i)));
  if (placed != nullptr) {
    const std::optional<graph::NodeId> ran = session.graph().find(g.node(id).name);
    MIRRA_CHECK(ran && session.graph().node(*ran).device, "run_op: the session placed no node of that name");
    *placed = session.graph().node(*ran).device->kind;
  }
  return outputs;
}

void check_op(const std::string& op, const std::vector<Tensor>& inputs, const AttrMap& attrs,
              const std::vector<Tensor>& expected, double tolerance, std::optional<double> backend_tolerance,
              size_t variables) {
  for (bool unknown_batch : {false, true}) {
    CAPTURE(op);
    CAPTURE(unknown_batch);
    auto outputs = run_op(op, inputs, attrs, unknown_batch, {}, variables);
    REQUIRE_MESSAGE(outputs.ok(), outputs.status().to_string());
    REQUIRE(outputs->size() == expected.size());
    if (variables == 0) check_forwarding(op, inputs, *outputs);
    if (!unknown_batch) check_declared_properties(op, inputs, attrs, *outputs, variables);
    for (size_t k = 0; k < expected.size(); ++k) {
      CAPTURE(k);
      check_elements((*outputs)[k], expected[k], tolerance);
    }
    std::string signature = op + "(";
    for (size_t i = 0; i < inputs.size(); ++i) signature += (i > 0 ? ", " : "") + std::string(graph::dtype_name(inputs[i].dtype()));
    signature += ")";
    for (graph::DeviceKind kind : backends_under_test()) {
      if (!has_kernel(kind, op)) continue;  // reported as missing by the coverage check
      graph::DeviceKind placed = kind;
      auto on_device = run_op(op, inputs, attrs, unknown_batch, {kind, 0}, variables, &placed);
      CAPTURE(graph::device_kind_name(kind));
      REQUIRE_MESSAGE(on_device.ok(), on_device.status().to_string());
      check_conformance(kind, op, *on_device, *outputs, backend_tolerance.value_or(tolerance));
      (placed == kind ? conformance_ran(kind) : conformance_fell_back(kind)).insert(signature);
    }
  }
  checked_ops().insert(op);
}

Tensor random_of(runtime::Random& rng, DType dtype, const TensorShape& shape, double low, double high) {
  if (graph::is_floating(dtype)) {
    return make_tensor(dtype, shape, [&](int64_t) { return low + (high - low) * rng.uniform(); });
  }
  if (dtype == DType::boolean) return make_tensor(dtype, shape, [&](int64_t) { return static_cast<double>(rng.below(2)); });
  const double least = std::max(std::ceil(low), dtype == DType::u8 ? 0.0 : -1e18);
  const double most = std::max(least, std::ceil(high) - 1);
  return make_tensor(dtype, shape, [&](int64_t) {
    return least + static_cast<double>(rng.below(static_cast<uint64_t>(most - least) + 1));
  });
}

double dtype_tolerance(DType dtype) {
  switch (dtype) {
    case DType::f64: return 1e-12;
    case DType::f32: return 1e-5;
    case DType::bf16: return 0x1.0p-6;  // two roundings of 8 significant bits
    case DType::f16: return 0x1.0p-9;   // of 11
    default: return 0;
  }
}

bool schema_accepts(const std::string& op, const std::vector<graph::TensorType>& inputs, const AttrMap& attrs,
                    size_t variables) {
  graph::Graph g;
  graph::Builder b(g, ops::registry());
  return add_op_node(b, op, inputs, attrs, variables).ok();
}

std::map<std::string, std::set<DType>>& swept_dtypes() {
  static std::map<std::string, std::set<DType>> swept;
  return swept;
}

void sweep_dtypes(const std::string& op, const std::function<std::pair<std::vector<graph::TensorType>, AttrMap>(DType)>& node,
                  const std::function<void(DType)>& check) {
  CAPTURE(op);
  bool accepted = false;
  for (DType dtype : kAllDtypes) {
    const auto [inputs, attrs] = node(dtype);
    if (!schema_accepts(op, inputs, attrs)) continue;
    CAPTURE(graph::dtype_name(dtype));
    check(dtype);
    swept_dtypes()[op].insert(dtype);
    accepted = true;
  }
  CHECK_MESSAGE(accepted, op << "'s schema accepted the sweep's case at no dtype");
}

void check_op_at_every_dtype(const std::string& op, const std::function<OpCase(DType)>& make) {
  CAPTURE(op);
  bool accepted = false;
  for (DType dtype : kAllDtypes) {
    const OpCase c = make(dtype);
    std::vector<graph::TensorType> types;
    for (const Tensor& input : c.inputs) types.push_back({input.dtype(), graph::Shape(input.shape().to_vector())});
    if (!schema_accepts(op, types, c.attrs, c.variables)) continue;
    CAPTURE(graph::dtype_name(dtype));
    check_op(op, c.inputs, c.attrs, c.expected, c.tolerance.value_or(dtype_tolerance(dtype)), c.backend_tolerance,
             c.variables);
    swept_dtypes()[op].insert(dtype);
    accepted = true;
  }
  CHECK_MESSAGE(accepted, op << "'s schema accepted the sweep's case at no dtype");
}

std::vector<int64_t> unravel(int64_t flat, const std::vector<int64_t>& dims) {
  std::vector<int64_t> index(dims.size());
  for (size_t d = dims.size(); d-- > 0;) {
    index[d] = flat % dims[d];
    flat /= dims[d];
  }
  return index;
}

int64_t ravel(const std::vector<int64_t>& index, const std::vector<int64_t>& dims) {
  int64_t flat = 0;
  for (size_t d = 0; d < dims.size(); ++d) flat = flat * dims[d] + index[d];
  return flat;
}

double element(const Tensor& t, int64_t i) {
  // A switch, not visit_dtype: reference loops call this millions of times.
  switch (t.dtype()) {
    case DType::f32: return t.data<float>()[i];
    case DType::f64: return t.data<double>()[i];
    case DType::i32: return t.data<int32_t>()[i];
    case DType::i64: return static_cast<double>(t.data<int64_t>()[i]);
    case DType::u8: return t.data<uint8_t>()[i];
    case DType::boolean: return t.data<bool>()[i] ? 1.0 : 0.0;
    case DType::bf16: return static_cast<float>(t.data<graph::bfloat16>()[i]);
    case DType::f16: return static_cast<float>(t.data<graph::float16>()[i]);
  }
  MIRRA_CHECK(false, "element: unknown dtype");
  return 0;
}

Tensor make_tensor(DType dtype, const TensorShape& shape, const std::function<double(int64_t)>& f) {
  Tensor t = Tensor::empty(runtime::host_allocator(), dtype, shape);
  const graph::Status status = ops::cpu::visit_dtype<float, double, int32_t, int64_t, uint8_t, bool, graph::bfloat16, graph::float16>(
      dtype, [&]<class T>(ops::cpu::Type<T>) {
        for (int64_t i = 0; i < t.num_elements(); ++i) {
          if constexpr (std::is_same_v<T, graph::bfloat16> || std::is_same_v<T, graph::float16>) {
            t.mutable_data<T>()[i] = T(static_cast<float>(f(i)));  // rounded to nearest, ties to even
          } else {
            t.mutable_data<T>()[i] = ops::math::convert<T>(f(i));  // integers truncated, saturating
          }
        }
        return graph::Status();
      });
  MIRRA_CHECK(status.ok());
  return t;
}

Tensor as_dtype(const Tensor& t, DType dtype) {
  return make_tensor(dtype, t.shape(), [&](int64_t i) { return element(t, i); });
}

}  // namespace mirra::test
