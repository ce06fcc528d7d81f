// A model small enough to corrupt at every byte: images f32[?,2,2,1] -> reshape -> dense 4x3 (+ a
// constant scale) -> softmax cross-entropy, momentum optimizer, stored weights. The fuzzers' seed
// corpus and the malformed-file tests start from it.
#pragma once

#include "serialization/model_file.h"

namespace mirra::testing {

serialization::Model tiny_model();

}  // namespace mirra::testing
