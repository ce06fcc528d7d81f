// with_element_type: runs a byte-moving kernel with an unsigned integer type of the tensor's element
// size, so that layout ops (transpose, slice, concat, pad) are written once for every dtype.
#pragma once

#include <cstdint>
#include <type_traits>

#include "graph/dtype.h"

namespace mirra::ops::cpu {

template <class F>
void with_element_type(graph::DType dtype, F&& f) {
  switch (graph::dtype_size(dtype)) {
    case 1: f(std::type_identity<uint8_t>{}); break;
    case 2: f(std::type_identity<uint16_t>{}); break;
    case 4: f(std::type_identity<uint32_t>{}); break;
    default: f(std::type_identity<uint64_t>{}); break;
  }
}

}  // namespace mirra::ops::cpu
