// Source ops (no inputs): Placeholder (fed at run time), Const (a value stored in the graph),
// Variable (state kept by the session, created from its initialiser, with how replicas' writes of it
// combine), Fill (a constant-valued tensor), Range (start, start + delta, ... before limit).
#pragma once

#include <optional>
#include <span>
#include <string_view>

#include "graph/builder.h"
#include "ops/initializers.h"

namespace mirra::ops {

using graph::Builder;
using graph::DType;
using graph::Shape;
using graph::ValueRef;

ValueRef placeholder(Builder& b, std::string_view name, DType dtype, Shape shape);
ValueRef constant(Builder& b, graph::TensorValue value, std::string_view name = "Const");
ValueRef scalar(Builder& b, float value);
template <class T>
ValueRef constant(Builder& b, Shape shape, std::span<const T> values) {
  return constant(b, graph::TensorValue::from<T>(std::move(shape), values));
}
// How the replicas' writes of a variable combine under a replicating strategy (TensorFlow's
// tf.VariableAggregation), for state a step writes from each replica's own values (moving statistics,
// counters of examples seen): every replica then writes the sum of the values they computed, their
// mean over the replicas (of every worker), or the first replica's. A trainable variable's gradients
// are summed whatever it says; `none`, the default, refuses such writes under a replicating strategy.
enum class VariableAggregation { none, sum, mean, only_first_replica };

std::string_view aggregation_name(VariableAggregation aggregation);  // "none", "sum", "mean", "only_first_replica"
std::optional<VariableAggregation> aggregation_from_name(std::string_view name);
// A Variable node's aggregation (its "aggregation" attr; none when absent).
VariableAggregation variable_aggregation(const graph::Node& variable);
// When the replicas' copies of such a variable are combined (TensorFlow's tf.VariableSynchronization):
// on_write, at every write (each replica writes the combination, so the copies stay alike); or
// on_read, only when the variable is read from outside the step (evaluation, checkpoints, model
// files: TrainingGraph::synchronize), each replica writing its own value in between. on_read needs
// the mean aggregation and writes that are affine in the replica's own values (a moving average: the
// mean of the replicas' moving averages is the moving average of their means), so both give one value;
// on_read saves a collective per write in every step (batch normalisation's moving statistics).
enum class VariableSynchronization { on_write, on_read };

std::string_view synchronization_name(VariableSynchronization synchronization);  // "on_write", "on_read"
std::optional<VariableSynchronization> synchronization_from_name(std::string_view name);
// A Variable node's synchronization (its "synchronization" attr; on_write when absent).
VariableSynchronization variable_synchronization(const graph::Node& variable);
// Whether `node` is a Variable whose "trainable" attr is true: what optimizers update.
bool is_trainable_variable(const graph::Node& node);

// A variable of fully defined `shape`; random initialisers draw from b.next_seed(). Optimizers update
// trainable ones; non-trainable ones hold other state (optimizer slots, counters, moving statistics).
ValueRef variable(Builder& b, std::string_view name, Shape shape, Initializer init = Initializer::zeros(),
                  DType dtype = DType::f32, bool trainable = true,
                  VariableAggregation aggregation = VariableAggregation::none,
                  VariableSynchronization synchronization = VariableSynchronization::on_write);
ValueRef fill(Builder& b, Shape shape, double value, DType dtype = DType::f32);
// start, start + delta, ... up to but not including limit, as tf.range (delta may be negative).
ValueRef range(Builder& b, double start, double limit, double delta = 1.0, DType dtype = DType::i32);
// A scalar `value` of the same dtype as `like` (for constants in gradient rules).
ValueRef scalar_of(Builder& b, double value, ValueRef like);

}  // namespace mirra::ops
