// How a field's values become a placeholder's: converted to the placeholder's dtype; into a floating
// placeholder each value is scaled as v * scale[c] + shift[c] on the way (normalisation; c is the
// value's index modulo the number of channels, so per-channel statistics apply along the last dim);
// or an integer field becomes a one-hot encoding of `one_hot` classes. Integers that do not fit the
// placeholder's dtype, and classes outside [0, one_hot), are errors naming the value; a floating field
// never feeds an integer placeholder (check_conversion refuses it before any value is read).
//
//   ValueConversion c{.from = ElementType::u8, .to = graph::DType::f32, .scale = {1 / 255.f}, .shift = {0}};
//   convert_values(c, bytes, 784, out);
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "graph/dtype.h"
#include "graph/status.h"
#include "runtime/data/field.h"

namespace mirra::runtime::data {

struct ValueConversion {
  ElementType from = ElementType::f32;
  graph::DType to = graph::DType::f32;
  // Empty: values as they are; else one entry per channel (one for all). Floating placeholders only.
  std::vector<double> scale, shift;
  int64_t one_hot = 0;  // > 0: each value is a class, written as `one_hot` values (1 at the class, else 0)
};

// Whether `conversion` can be made: its types, its scale and shift (equal sizes, finite), the one-hot
// depth. `what` names the field and placeholder in errors.
graph::Status check_conversion(const ValueConversion& conversion, const std::string& what);

// Converts `count` values at `in` (conversion.from) into `out` (conversion.to; count * one_hot values
// with one_hot), the first value in channel 0. Errors name the first offending value by its index
// among the `count`.
graph::Status convert_values(const ValueConversion& conversion, const std::byte* in, int64_t count, std::byte* out);

}  // namespace mirra::runtime::data
