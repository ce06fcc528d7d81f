// Symbolic reverse-mode differentiation: gradients(b, y, xs) adds the nodes that compute d(sum y)/dx
// for each x to the graph, under the scope "gradients/<node>_grad". Each op's rule lives with the op
// (OpSchema::gradient). Gradients of a value used several times are summed. Only floating-point values
// carry gradients. An x that y does not depend on gets zeros.
//
// REQUIRES: y and every x are valid values of b's graph.
// ENSURES: one gradient per x, of x's type; or an error naming the first op on a path from an x to y
// that has no gradient rule.
#pragma once

#include <span>
#include <vector>

#include "graph/builder.h"

namespace mirra::graph {

// `dy` seeds the gradient of y (default: ones_like(y), as for a scalar loss).
Expected<std::vector<ValueRef>> gradients(Builder& b, ValueRef y, std::span<const ValueRef> xs, ValueRef dy = {});

// Ones of y's type: d(sum y)/dy, the default seed.
ValueRef ones_like(Builder& b, ValueRef y);

}  // namespace mirra::graph
