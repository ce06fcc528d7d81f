// Placeholder, Const, Variable, Fill and Range: schemas, builders and CPU kernels.
#include "ops/source_ops.h"

#include <cstring>

#include "ops/cpu/dtype_dispatch.h"
#include "ops/elementwise_math.h"
#include "ops/initializers.h"
#include "ops/kernel_shapes.h"
#include "ops/op_families.h"
#include "ops/shape_inference.h"

namespace mirra::ops {

using graph::AttrSpec;
using graph::AttrType;
using graph::OpSchema;
using runtime::KernelContext;
using runtime::Tensor;
using runtime::TensorShape;

namespace {

Status placeholder_kernel(KernelContext& ctx) {
  return graph::failed_precondition("placeholder '" + ctx.node().name + "' must be fed, and no value was given");
}

Status const_kernel(KernelContext& ctx) {
  const auto& value = ctx.attr<graph::TensorValue>("value");
  Tensor& out = ctx.allocate_output(0, value.type.dtype, TensorShape(value.type.shape.dims));
  if (out.byte_size() > 0) std::memcpy(out.mutable_raw_data(), value.bytes->data(), out.byte_size());
  return Status();
}

// Why a Variable's partition_of and partition_offset do not name rows of a whole variable cut along
// axis 0, or "" when they do or it has neither.
std::string partition_problem(const graph::Node& node, const Shape& shape) {
  const Shape* whole = node.attrs.get<Shape>("partition_of");
  const int64_t* offset = node.attrs.get<int64_t>("partition_offset");
  if (whole == nullptr && offset == nullptr) return "";
  if (whole == nullptr || offset == nullptr) return "partition_of and partition_offset come together";
  if (node.attrs.contains("shard_of")) return "a part of a partitioned variable is no share of sharded optimizer state";
  bool same_rows = whole->rank() == shape.rank() && whole->rank() > 0 && whole->num_elements().has_value();
  for (int64_t d = 1; same_rows && d < shape.rank(); ++d) same_rows = whole->dim(d) == shape.dim(d);
  if (!same_rows) {
    return "a part " + shape.to_string() + " of " + whole->to_string() + " along axis 0 keeps its rank and its other dimensions";
  }
  if (*offset < 0 || shape.dim(0) < 0 || *offset > whole->dim(0) - shape.dim(0)) {
    return std::to_string(shape.dim(0)) + " rows from row " + std::to_string(*offset) + " are outside " + whole->to_string();
  }
  return "";
}

Status variable_kernel(KernelContext& ctx) {
  const auto& node = ctx.node();
  auto value = ctx.variables().get_or_create(node.name, [&]() { return initial_variable_value(ctx, ctx.device().allocator()); });
  if (!value.ok()) return value.status();
  ctx.set_output(0, *value);
  return Status();
}

Status fill_kernel(KernelContext& ctx) {
  Tensor& out = ctx.allocate_output(0, ctx.attr<DType>("dtype"), TensorShape(ctx.attr<Shape>("shape").dims));
  const double value = ctx.attr<double>("value");
  using graph::bfloat16, graph::float16;
  return cpu::visit_dtype<float, double, int32_t, int64_t, uint8_t, bool, bfloat16, float16>(out.dtype(), [&]<class T>(cpu::Type<T>) {
    std::fill_n(out.mutable_data<T>(), out.num_elements(), math::convert<T>(value));
    return Status();
  });
}

Status range_kernel(KernelContext& ctx) {
  const DType dtype = ctx.attr<DType>("dtype");
  const double start = ctx.attr<double>("start"), delta = ctx.attr<double>("delta");
  MIRRA_ASSIGN_OR_RETURN(const int64_t n, range_size(dtype, start, ctx.attr<double>("limit"), delta));
  Tensor& out = ctx.allocate_output(0, dtype, TensorShape({n}));
  return cpu::visit_dtype<float, double, int32_t, int64_t>(dtype, [&]<class T>(cpu::Type<T>) {
    T* y = out.mutable_data<T>();
    const T first = static_cast<T>(start), step = static_cast<T>(delta);
    for (int64_t i = 0; i < n; ++i) y[i] = math::range_element(first, step, i);
    return Status();
  });
}

Expected<std::vector<TensorType>> infer_range(const InferContext& ctx) {
  const DType dtype = ctx.attr<DType>("dtype");
  const auto n = range_size(dtype, ctx.attr<double>("start"), ctx.attr<double>("limit"), ctx.attr<double>("delta"));
  if (!n.ok()) return ctx.error(n.status().message());
  return std::vector<TensorType>{{dtype, Shape({*n})}};
}

Expected<std::vector<TensorType>> infer_fully_defined(const InferContext& ctx) {
  const Shape& shape = ctx.attr<Shape>("shape");
  if (!shape.is_fully_defined()) return ctx.error("shape " + shape.to_string() + " must be fully defined");
  if (!shape.num_elements()) return ctx.error("shape " + shape.to_string() + " has too many elements");
  return std::vector<TensorType>{{ctx.attr<DType>("dtype"), shape}};
}

}  // namespace

void register_source_ops(graph::OpRegistry& schemas, runtime::KernelRegistry& kernels) {
  using graph::DeviceKind;
  schemas.add(OpSchema{
      .name = "Placeholder",
      .attrs = {{"dtype", AttrType::dtype, {}}, {"shape", AttrType::shape, {}}},
      .infer = [](const InferContext& ctx) -> Expected<std::vector<TensorType>> {
        return std::vector<TensorType>{{ctx.attr<DType>("dtype"), ctx.attr<Shape>("shape")}};
      },
      .cost = graph::costs_nothing,
      .summary = "An input, fed by name at run time; -1 dims take any size.",
      .no_gradient = "a source has no inputs"});
  // Fed values are host tensors.
  kernels.add("Placeholder", DeviceKind::cpu, {.fn = placeholder_kernel, .host_memory_outputs = 1});

  schemas.add(OpSchema{
      .name = "Const",
      .attrs = {{"value", AttrType::tensor, {}}},
      .infer = [](const InferContext& ctx) -> Expected<std::vector<TensorType>> {
        const auto& value = ctx.attr<graph::TensorValue>("value");
        const auto count = value.type.shape.num_elements();
        if (!count || value.bytes == nullptr ||
            value.bytes->size() != static_cast<size_t>(*count) * graph::dtype_size(value.type.dtype)) {
          return ctx.error("value of type " + value.type.to_string() + " does not hold exactly its elements");
        }
        return std::vector<TensorType>{value.type};
      },
      .cost = graph::costs_nothing,
      .summary = "A constant tensor stored in the graph.",
      .no_gradient = "a source has no inputs"});
  kernels.add("Const", DeviceKind::cpu, {const_kernel});

  schemas.add(OpSchema{
      .name = "Variable",
      .attrs = {{"dtype", AttrType::dtype, DType::f32},
                {"shape", AttrType::shape, {}},
                {"initializer", AttrType::string, std::string("zeros")},
                {"init_value", AttrType::real, 0.0},
                {"seed", AttrType::integer, int64_t{0}},
                {"trainable", AttrType::boolean, true},
                {"shard_of", AttrType::shape, std::nullopt, /*optional=*/true},
                {"partition_of", AttrType::shape, std::nullopt, /*optional=*/true},
                {"partition_offset", AttrType::integer, std::nullopt, /*optional=*/true},
                {"aggregation", AttrType::string, std::nullopt, /*optional=*/true},
                {"synchronization", AttrType::string, std::nullopt, /*optional=*/true}},
      .infer = [](const InferContext& ctx) -> Expected<std::vector<TensorType>> {
        const DType dtype = ctx.attr<DType>("dtype");
        if (const std::string* aggregation = ctx.node().attrs.get<std::string>("aggregation");
            aggregation != nullptr && !aggregation_from_name(*aggregation)) {
          return ctx.error("unknown aggregation '" + *aggregation + "' (none, sum, mean or only_first_replica)");
        }
        if (const std::string* synchronization = ctx.node().attrs.get<std::string>("synchronization")) {
          if (!synchronization_from_name(*synchronization)) {
            return ctx.error("unknown synchronization '" + *synchronization + "' (on_write or on_read)");
          }
          if (*synchronization == "on_read" && variable_aggregation(ctx.node()) != VariableAggregation::mean) {
            return ctx.error("synchronization on_read needs the aggregation mean, not " +
                             std::string(aggregation_name(variable_aggregation(ctx.node()))));
          }
        }
        if (const Shape* whole = ctx.node().attrs.get<Shape>("shard_of")) {
          const Shape& shape = ctx.attr<Shape>("shape");
          const auto whole_elements = whole->num_elements();
          if (shape.rank() != 1 || !whole_elements || shape.dim(0) < 0 || shape.dim(0) > *whole_elements) {
            return ctx.error("a shard of " + whole->to_string() + " must be a list of at most its " +
                             std::to_string(whole_elements.value_or(0)) + " elements, not " + shape.to_string());
          }
        }
        if (auto problem = partition_problem(ctx.node(), ctx.attr<Shape>("shape")); !problem.empty()) return ctx.error(problem);
        const std::string& kind = ctx.attr<std::string>("initializer");
        if (dtype != DType::f32 && dtype != DType::f64 && dtype != DType::i32 && dtype != DType::i64) {
          return ctx.error("variables must be f32, f64, i32 or i64");
        }
        if (!is_known_initializer(kind)) return ctx.error("unknown initializer '" + kind + "'");
        if (!graph::is_floating(dtype) && kind != "zeros" && kind != "ones" && kind != "constant") {
          return ctx.error("initializer '" + kind + "' needs a floating variable");
        }
        return infer_fully_defined(ctx);
      },
      .cost = graph::costs_nothing,
      .summary = "State kept by the session across steps, created from its initialiser on first use. With "
                 "shard_of, one replica's flat share of a variable of that shape (sharded optimizer state); "
                 "with partition_of and partition_offset, rows [offset, offset + shape[0]) of a variable of that "
                 "shape cut along axis 0 (a parameter server's part of it), initialised as those rows of the whole. "
                 "aggregation: how replicas' writes of it combine (none, sum, mean, only_first_replica); "
                 "synchronization: when (on_write, at every write; on_read, when read from outside the step).",
      .no_gradient = "a source has no inputs"});
  kernels.add("Variable", DeviceKind::cpu, {variable_kernel});

  schemas.add(OpSchema{
      .name = "Fill",
      .attrs = {{"dtype", AttrType::dtype, DType::f32}, {"shape", AttrType::shape, {}}, {"value", AttrType::real, {}}},
      .infer = infer_fully_defined,
      .summary = "A tensor of one shape with every element equal to value.",
      .no_gradient = "a source has no inputs"});
  kernels.add("Fill", DeviceKind::cpu, {fill_kernel});

  schemas.add(OpSchema{
      .name = "Range",
      .attrs = {{"start", AttrType::real, 0.0},
                {"limit", AttrType::real, {}},
                {"delta", AttrType::real, 1.0},
                {"dtype", AttrType::dtype, DType::i32}},
      .infer = infer_range,
      .summary = "start, start + delta, ... up to but not including limit (f32, f64, i32, i64), as tf.range.",
      .no_gradient = "a source has no inputs"});
  kernels.add("Range", DeviceKind::cpu, {range_kernel});
}

ValueRef placeholder(Builder& b, std::string_view name, DType dtype, Shape shape) {
  return b.add_value({.op = "Placeholder", .attrs = {{"dtype", dtype}, {"shape", std::move(shape)}}, .name = std::string(name)});
}

ValueRef constant(Builder& b, graph::TensorValue value, std::string_view name) {
  return b.add_value({.op = "Const", .attrs = {{"value", std::move(value)}}, .name = std::string(name)});
}

ValueRef range(Builder& b, double start, double limit, double delta, DType dtype) {
  return b.add_value({.op = "Range",
                      .attrs = {{"start", start}, {"limit", limit}, {"delta", delta}, {"dtype", dtype}}});
}

ValueRef scalar(Builder& b, float value) { return constant<float>(b, Shape{}, std::span<const float>(&value, 1)); }

namespace {

constexpr std::pair<VariableAggregation, std::string_view> kAggregationNames[] = {
    {VariableAggregation::none, "none"},
    {VariableAggregation::sum, "sum"},
    {VariableAggregation::mean, "mean"},
    {VariableAggregation::only_first_replica, "only_first_replica"},
};

constexpr std::pair<VariableSynchronization, std::string_view> kSynchronizationNames[] = {
    {VariableSynchronization::on_write, "on_write"},
    {VariableSynchronization::on_read, "on_read"},
};

// Of a table of names whose first entry is the default: the name of `value`, the value called
// `name`, and the value a node's string attr `attr` names (the default when absent or unknown).
template <class T, size_t N>
std::string_view name_in(const std::pair<T, std::string_view> (&table)[N], T value) {
  for (const auto& [known, name] : table) {
    if (known == value) return name;
  }
  return table[0].second;
}

template <class T, size_t N>
std::optional<T> value_named(const std::pair<T, std::string_view> (&table)[N], std::string_view name) {
  for (const auto& [value, known] : table) {
    if (known == name) return value;
  }
  return std::nullopt;
}

template <class T, size_t N>
T attr_value(const graph::Node& node, std::string_view attr, const std::pair<T, std::string_view> (&table)[N]) {
  const std::string* name = node.attrs.get<std::string>(attr);
  return name != nullptr ? value_named(table, *name).value_or(table[0].first) : table[0].first;
}

}  // namespace

std::string_view synchronization_name(VariableSynchronization synchronization) {
  return name_in(kSynchronizationNames, synchronization);
}

std::optional<VariableSynchronization> synchronization_from_name(std::string_view name) {
  return value_named(kSynchronizationNames, name);
}

VariableSynchronization variable_synchronization(const graph::Node& variable) {
  return attr_value(variable, "synchronization", kSynchronizationNames);
}

std::string_view aggregation_name(VariableAggregation aggregation) { return name_in(kAggregationNames, aggregation); }

std::optional<VariableAggregation> aggregation_from_name(std::string_view name) {
  return value_named(kAggregationNames, name);
}

bool is_trainable_variable(const graph::Node& node) {
  const bool* trainable = node.attrs.get<bool>("trainable");
  return node.op == "Variable" && trainable != nullptr && *trainable;
}

VariableAggregation variable_aggregation(const graph::Node& variable) {
  return attr_value(variable, "aggregation", kAggregationNames);
}

ValueRef variable(Builder& b, std::string_view name, Shape shape, Initializer init, DType dtype, bool trainable,
                  VariableAggregation aggregation, VariableSynchronization synchronization) {
  graph::AttrMap attrs = {{"dtype", dtype},
                          {"shape", std::move(shape)},
                          {"initializer", init.kind},
                          {"init_value", init.value},
                          {"seed", static_cast<int64_t>(b.next_seed() >> 1)},
                          {"trainable", trainable}};
  if (aggregation != VariableAggregation::none) attrs.set("aggregation", std::string(aggregation_name(aggregation)));
  if (synchronization != VariableSynchronization::on_write) {
    attrs.set("synchronization", std::string(synchronization_name(synchronization)));
  }
  return b.add_value({.op = "Variable", .attrs = std::move(attrs), .name = std::string(name)});
}

ValueRef scalar_of(Builder& b, double value, ValueRef like) {
  return fill(b, Shape{}, value, like.valid() ? b.type(like).dtype : DType::f32);
}

ValueRef fill(Builder& b, Shape shape, double value, DType dtype) {
  return b.add_value({.op = "Fill", .attrs = {{"dtype", dtype}, {"shape", std::move(shape)}, {"value", value}}});
}

}  // namespace mirra::ops
