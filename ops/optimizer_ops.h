// Optimizer update ops, which change a variable in place and output nothing: ApplyGradientDescent
// (v -= lr * g), ApplyMomentum (a = m * a + g; v -= lr * a, or with Nesterov v -= lr * (g + m * a)),
// ApplyAdam (Adam), AssignAdd (step counters) and Assign. With a weight_decay the first three decay
// the variable first, v *= 1 - lr * weight_decay (SGDW, AdamW: decoupled from the gradient).
// They take (variable, [slots,] gradient, learning rate), so a strategy can put an all-reduce between
// a gradient and its update, and optionally a bool scalar `apply`: false makes the update change
// nothing (loss scaling skips a step whose gradients overflowed). NoOp groups nodes under one target
// by control edges. With `lazy`, momentum's and Adam's update of an embedding table (a variable whose
// gradient is the rows of its lookups) changes only the rows looked up and their slots, once
// ops/sparse_updates.h has made it row-wise; the attribute changes nothing else.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "graph/builder.h"

namespace mirra::runtime {
class Session;
}  // namespace mirra::runtime

namespace mirra::ops {

using graph::Builder;
using graph::NodeId;
using graph::ValueRef;

NodeId apply_gradient_descent(Builder& b, ValueRef variable, ValueRef gradient, ValueRef learning_rate,
                              double weight_decay = 0.0, ValueRef apply = {});
struct MomentumSettings {
  double momentum = 0.9;
  bool nesterov = false;
  double weight_decay = 0.0;
  bool lazy = false;
};
NodeId apply_momentum(Builder& b, ValueRef variable, ValueRef accumulator, ValueRef gradient, ValueRef learning_rate,
                      const MomentumSettings& settings, ValueRef apply = {});
struct AdamOperands {
  ValueRef variable, m, v, gradient, learning_rate;
  ValueRef step;  // i64 scalar: updates applied so far
};
struct AdamSettings {
  double beta1 = 0.9, beta2 = 0.999, epsilon = 1e-7;
  double weight_decay = 0.0;
  bool lazy = false;
};
NodeId apply_adam(Builder& b, const AdamOperands& operands, const AdamSettings& settings, ValueRef apply = {});
NodeId assign_add(Builder& b, ValueRef variable, ValueRef value, ValueRef apply = {});
NodeId assign(Builder& b, ValueRef variable, ValueRef value);
// The parts' elements, in order, become the variable's (their element counts add up to its).
NodeId assign(Builder& b, ValueRef variable, const std::vector<ValueRef>& parts);
NodeId no_op(Builder& b, std::string_view name, std::vector<NodeId> after);

// The bytes of the optimizer slots (the update ops' operands between variable and gradient) that each
// device of `session` holds, by device name, from the values the session holds.
std::map<std::string, int64_t> optimizer_slot_bytes(runtime::Session& session);

}  // namespace mirra::ops
