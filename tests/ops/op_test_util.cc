// Kernel test helpers.
#include "tests/ops/op_test_util.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <string_view>

#include "ops/cpu/dtype_dispatch.h"

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

namespace {

// Whether every element of `got` is within `tolerance` of `want`; the first that is not is reported.
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

graph::Expected<std::vector<Tensor>> run_op(const std::string& op, const std::vector<Tensor>& inputs,
                                            const AttrMap& attrs, bool unknown_batch, graph::DeviceId device) {
  graph::Graph g;
  graph::Builder b(g, ops::registry());
  std::vector<graph::ValueRef> values;
  runtime::Feeds feeds;
  for (size_t i = 0; i < inputs.size(); ++i) {
    std::vector<int64_t> dims = inputs[i].shape().to_vector();
    if (unknown_batch && i == 0 && !dims.empty()) dims[0] = -1;
    const std::string name = "in" + std::to_string(i);
    values.push_back(ops::placeholder(b, name, inputs[i].dtype(), graph::Shape(dims)));
    feeds[name] = inputs[i];
  }
  const graph::NodeId id = b.add({.op = op, .inputs = values, .attrs = attrs});
  if (!b.status().ok()) return b.status();
  std::vector<graph::ValueRef> fetches;
  for (uint16_t i = 0; i < g.node(id).outputs.size(); ++i) fetches.push_back({id, i});
  runtime::Session session(g, ops::kernels(), backend_session_options(device.kind));
  return session.run(feeds, fetches);
}

void check_op(const std::string& op, const std::vector<Tensor>& inputs, const AttrMap& attrs,
              const std::vector<Tensor>& expected, double tolerance, std::optional<double> backend_tolerance) {
  for (bool unknown_batch : {false, true}) {
    CAPTURE(op);
    CAPTURE(unknown_batch);
    auto outputs = run_op(op, inputs, attrs, unknown_batch);
    REQUIRE_MESSAGE(outputs.ok(), outputs.status().to_string());
    REQUIRE(outputs->size() == expected.size());
    check_forwarding(op, inputs, *outputs);
    for (size_t k = 0; k < expected.size(); ++k) {
      CAPTURE(k);
      check_elements((*outputs)[k], expected[k], tolerance);
    }
    for (graph::DeviceKind kind : backends_under_test()) {
      if (!has_kernel(kind, op)) continue;  // reported as missing by the coverage check
      auto on_device = run_op(op, inputs, attrs, unknown_batch, {kind, 0});
      CAPTURE(graph::device_kind_name(kind));
      REQUIRE_MESSAGE(on_device.ok(), on_device.status().to_string());
      check_conformance(kind, op, *on_device, *outputs, backend_tolerance.value_or(tolerance));
    }
  }
  checked_ops().insert(op);
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
  double out = 0;
  const graph::Status status = ops::cpu::visit_dtype<float, double, int32_t, int64_t, uint8_t, bool, graph::bfloat16, graph::float16>(
      t.dtype(), [&]<class T>(ops::cpu::Type<T>) {
        if constexpr (std::is_same_v<T, graph::bfloat16> || std::is_same_v<T, graph::float16>) {
          out = static_cast<double>(static_cast<float>(t.data<T>()[i]));
        } else {
          out = static_cast<double>(t.data<T>()[i]);
        }
        return graph::Status();
      });
  MIRRA_CHECK(status.ok());
  return out;
}

Tensor make_tensor(DType dtype, const TensorShape& shape, const std::function<double(int64_t)>& f) {
  Tensor t = Tensor::empty(runtime::host_allocator(), dtype, shape);
  const graph::Status status = ops::cpu::visit_dtype<float, double, int32_t, int64_t, uint8_t, bool, graph::bfloat16, graph::float16>(
      dtype, [&]<class T>(ops::cpu::Type<T>) {
        for (int64_t i = 0; i < t.num_elements(); ++i) {
          if constexpr (std::is_same_v<T, graph::bfloat16> || std::is_same_v<T, graph::float16>) {
            t.mutable_data<T>()[i] = T(static_cast<float>(f(i)));  // rounded to nearest, ties to even
          } else {
            t.mutable_data<T>()[i] = static_cast<T>(f(i));
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
