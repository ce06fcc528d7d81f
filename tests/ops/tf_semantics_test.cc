// TensorFlow as the reference for mirra's TensorFlow-named ops: every case of
// tf_reference/cases.json (edge cases computed by TensorFlow 2.21 itself, see generate.py there) runs
// through mirra's op, and the outputs, the refusals and the gradients must be TensorFlow's, except in
// the few cases marked as mirra's deliberate departures (docs/ops.md says why).
#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>
#include <limits>

#include "graph/gradients.h"
#include "tests/golden_file.h"
#include "tests/ops/op_test_util.h"

namespace mirra::test {
namespace {

using nlohmann::json;

double number(const json& v) {
  if (!v.is_string()) return v.get<double>();
  const std::string s = v.get<std::string>();
  if (s == "nan") return std::numeric_limits<double>::quiet_NaN();
  return s == "inf" ? std::numeric_limits<double>::infinity() : -std::numeric_limits<double>::infinity();
}

DType dtype_named(const std::string& name) {
  for (DType d : {DType::f32, DType::f64, DType::i32, DType::i64, DType::u8, DType::boolean, DType::bf16, DType::f16}) {
    if (graph::dtype_name(d) == name) return d;
  }
  FAIL("unknown dtype " << name);
  return DType::f32;
}

Tensor tensor_of(const json& spec) {
  const DType dtype = dtype_named(spec["dtype"].get<std::string>());
  const json& values = spec["values"];
  return make_tensor(dtype, TensorShape(spec["shape"].get<std::vector<int64_t>>()),
                     [&](int64_t i) { return number(values[static_cast<size_t>(i)]); });
}

// The case's attributes, typed by the op's schema.
AttrMap attrs_of(const std::string& op, const json& attrs) {
  const graph::OpSchema* schema = ops::registry().find(op);
  REQUIRE(schema != nullptr);
  AttrMap out;
  for (const auto& item : attrs.items()) {
    const std::string name = item.key();  // not a structured binding: clang 14 cannot capture one
    const json& value = item.value();
    const auto spec = std::find_if(schema->attrs.begin(), schema->attrs.end(), [&](const auto& a) { return a.name == name; });
    REQUIRE_MESSAGE(spec != schema->attrs.end(), op << " has no attribute " << name);
    switch (spec->type) {
      case graph::AttrType::integer: out.set(name, value.get<int64_t>()); break;
      case graph::AttrType::int_list: out.set(name, value.get<std::vector<int64_t>>()); break;
      case graph::AttrType::boolean: out.set(name, value.get<bool>()); break;
      case graph::AttrType::real: out.set(name, value.get<double>()); break;
      case graph::AttrType::string: out.set(name, value.get<std::string>()); break;
      case graph::AttrType::dtype: out.set(name, dtype_named(value.get<std::string>())); break;
      default: FAIL("attribute kind not used by the cases: " << name);
    }
  }
  return out;
}

void check_same(const Tensor& got, const json& want_spec) {
  const Tensor want = tensor_of(want_spec);
  REQUIRE(got.type_string() == want.type_string());
  for (int64_t i = 0; i < want.num_elements(); ++i) {
    const double g = element(got, i), w = element(want, i);
    const bool equal = std::isnan(w) ? std::isnan(g)
                       : (!graph::is_floating(want.dtype()) || std::isinf(w)) ? g == w
                                                                               : std::abs(g - w) <= 1e-6 * std::max(1.0, std::abs(w));
    CHECK_MESSAGE(equal, "element " << i << ": got " << g << ", want " << w);
  }
}

// d sum(output 0 * upstream) / d input, for each input, built with mirra's gradient rules.
std::vector<Tensor> gradients_of(const std::string& op, const std::vector<Tensor>& inputs, const AttrMap& attrs, const Tensor& upstream) {
  graph::Graph g;
  graph::Builder b(g, ops::registry());
  std::vector<graph::ValueRef> xs;
  runtime::Feeds feeds;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::string name = "in" + std::to_string(i);
    xs.push_back(ops::placeholder(b, name, inputs[i].dtype(), graph::Shape(inputs[i].shape().to_vector())));
    feeds[name] = inputs[i];
  }
  const graph::NodeId id = b.add({.op = op, .inputs = xs, .attrs = attrs});
  // Integer inputs (indices) have no gradient; TensorFlow's is zeros, and so is what is returned here.
  std::vector<graph::ValueRef> differentiated;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (graph::is_floating(inputs[i].dtype())) differentiated.push_back(xs[i]);
  }
  feeds["upstream"] = upstream;
  const auto weights = ops::placeholder(b, "upstream", upstream.dtype(), graph::Shape(upstream.shape().to_vector()));
  const auto objective = ops::reduce_sum(b, ops::mul(b, graph::ValueRef{id, 0}, weights));
  auto grads = graph::gradients(b, objective, differentiated);
  REQUIRE_MESSAGE(grads.ok(), grads.status().to_string());
  runtime::Session session(g, ops::kernels());
  auto out = session.run(feeds, *grads);
  REQUIRE_MESSAGE(out.ok(), out.status().to_string());
  std::vector<Tensor> all;
  size_t next = 0;
  for (const Tensor& input : inputs) {
    all.push_back(graph::is_floating(input.dtype()) ? (*out)[next++]
                                                    : make_tensor(input.dtype(), input.shape(), [](int64_t) { return 0.0; }));
  }
  return all;
}

TEST_CASE("TensorFlow.edge_cases.match_tensorflow") {
  std::ifstream file(source_file("tests/ops/tf_reference/cases.json"));
  REQUIRE(file.good());
  const json reference = json::parse(file);
  CHECK(reference["producer"].get<std::string>().starts_with("TensorFlow 2.21"));
  int checked = 0;
  for (const json& c : reference["cases"]) {
    const std::string op = c["op"].get<std::string>();
    CAPTURE(c["name"].get<std::string>());
    std::vector<Tensor> inputs;
    for (const json& spec : c["inputs"]) inputs.push_back(tensor_of(spec));
    const AttrMap attrs = attrs_of(op, c["attrs"]);
    const auto outputs = run_op(op, inputs, attrs);
    if (c.contains("error")) {
      CHECK_MESSAGE(!outputs.ok(), "TensorFlow refuses this: " << c["error"].get<std::string>());
      ++checked;
      continue;
    }
    REQUIRE_MESSAGE(outputs.ok(), outputs.status().to_string());
    // Where mirra departs from TensorFlow on purpose (docs/ops.md), the case says what mirra gives.
    const json& want = c.contains("exception") ? c["mirra_outputs"] : c["outputs"];
    REQUIRE(outputs->size() == want.size());
    for (size_t k = 0; k < outputs->size(); ++k) check_same((*outputs)[k], want[k]);
    if (c.contains("gradients")) {
      const auto grads = gradients_of(op, inputs, attrs, tensor_of(c["upstream"]));
      for (size_t k = 0; k < grads.size(); ++k) check_same(grads[k], c["gradients"][k]);
    }
    ++checked;
  }
  CHECK(checked == static_cast<int>(reference["cases"].size()));
}

}  // namespace
}  // namespace mirra::test
