// Reading and writing a session's variables by replica-free name.
#include "tools/mirra/variables_io.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "ops/optimizers.h"
#include "strategies/strategy.h"

namespace mirra::runner {

namespace {

// Loss scaling's state, which only runs with fp16 mixed precision have (ops/optimizers.h).
bool is_loss_scale_state(std::string_view name) {
  return name == ops::kLossScaleVariable || name == ops::kLossScaleGoodStepsVariable;
}

}  // namespace

graph::Expected<std::vector<serialization::NamedTensor>> read_variables(runtime::Session& session, std::string_view skip) {
  const graph::Graph& g = session.graph();
  std::vector<std::string> names;
  std::vector<graph::ValueRef> fetches;
  for (const graph::Node& node : g.nodes()) {
    if (node.op != "Variable") continue;
    int replica = -1;
    const std::string_view name = strategies::replica_free_name(node.name, &replica);
    if (replica > 0 || name == skip || strategies::is_accumulator(name)) continue;
    names.emplace_back(name);
    fetches.push_back({node.id, 0});
  }
  MIRRA_ASSIGN_OR_RETURN(const std::vector<runtime::Tensor> values, session.run({}, fetches));
  std::vector<serialization::NamedTensor> out;
  for (size_t i = 0; i < names.size(); ++i) out.push_back({names[i], runtime::to_tensor_value(values[i])});
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  return out;
}

graph::Status check_values(const std::vector<serialization::NamedTensor>& values, std::string_view source) {
  for (const serialization::NamedTensor& v : values) {
    int64_t non_finite = 0;
    if (v.value.type.dtype == graph::DType::f32) {
      for (float x : v.value.values<float>()) non_finite += !std::isfinite(x);
    } else if (v.value.type.dtype == graph::DType::f64) {
      for (double x : v.value.values<double>()) non_finite += !std::isfinite(x);
    }
    if (non_finite > 0) {
      return graph::invalid_argument(std::string(source) + ": '" + v.name + "' holds " + std::to_string(non_finite) +
                                     " NaN or infinite values");
    }
    if (v.name == ops::kIterationsVariable && v.value.type.dtype == graph::DType::i64 &&
        std::any_of(v.value.values<int64_t>().begin(), v.value.values<int64_t>().end(), [](int64_t n) { return n < 0; })) {
      return graph::invalid_argument(std::string(source) + ": the optimizer's iteration count '" + v.name + "' is negative");
    }
  }
  return graph::Status();
}

graph::Status write_variables(runtime::Session& session, const std::vector<serialization::NamedTensor>& values,
                              bool require_all, std::string_view source, std::string_view skip) {
  MIRRA_RETURN_IF_ERROR(check_values(values, source));
  std::map<std::string, const serialization::NamedTensor*, std::less<>> by_name;
  for (const auto& v : values) by_name[v.name] = &v;
  std::set<std::string, std::less<>> used;
  for (const graph::Node& node : session.graph().nodes()) {
    if (node.op != "Variable") continue;
    int replica = -1;
    const std::string_view name = strategies::replica_free_name(node.name, &replica);
    if (name == skip || strategies::is_accumulator(name)) continue;
    const auto it = by_name.find(name);
    if (it == by_name.end()) {
      if (require_all && !is_loss_scale_state(name)) return graph::invalid_argument(std::string(source) + " has no value for variable '" + std::string(name) + "'");
      continue;
    }
    const graph::TensorValue& value = it->second->value;
    if (!(value.type == node.outputs[0])) {
      return graph::invalid_argument(std::string(source) + ": variable '" + std::string(name) + "' is " +
                                     value.type.to_string() + ", but the model's is " + node.outputs[0].to_string());
    }
    session.assign_variable(node.name, runtime::from_tensor_value(value));
    used.insert(it->first);
  }
  for (const auto& v : values) {
    if (!used.contains(v.name) && v.name != skip && !is_loss_scale_state(v.name)) {
      return graph::invalid_argument(std::string(source) + " holds '" + v.name + "', which is no variable of this model");
    }
  }
  return graph::Status();
}

}  // namespace mirra::runner
