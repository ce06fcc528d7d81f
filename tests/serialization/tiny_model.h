// Models small enough to corrupt at every byte: images f32[?,2,2,1] -> reshape -> dense 4x3 (+ a
// constant scale) -> softmax cross-entropy, momentum optimizer, stored weights. The fuzzers' seed
// corpus and the malformed-file tests start from it.
#pragma once

#include "serialization/model_file.h"

namespace mirra::testing {

serialization::Model tiny_model();
// images f32[?,4,4,1] -> conv 3x3x1x2 SAME -> relu -> max-pool 2x2 -> dense 8x3 -> loss; Adam with
// optimizer state. Covers string, list, shape and tensor attributes.
serialization::Model tiny_cnn_model();

// images f32[?,2,2,1] -> pad -> slice -> split -> concat -> reshape -> dense 4x3 (+ a fill) + one-hot
// of an argmax -> loss: every attribute that sizes an output, for the fuzzers to mutate.
serialization::Model tiny_sized_model();

}  // namespace mirra::testing
