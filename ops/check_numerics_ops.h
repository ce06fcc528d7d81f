// CheckNumerics (TensorFlow's op of that name): its input unchanged, or an error naming `message` when
// the input holds a NaN or an infinity. Training inserts it on each gradient with check_numerics.
#pragma once

#include <string>

#include "graph/builder.h"

namespace mirra::ops {

graph::ValueRef check_numerics(graph::Builder& b, graph::ValueRef x, std::string message);

}  // namespace mirra::ops
