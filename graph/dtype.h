// DType: the element types mirra's tensors hold, their sizes and their names ("f32", "i64", ...).
// The 16-bit floats bf16 and f16 are stored as graph::bfloat16 and graph::float16 (graph/float16.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "graph/float16.h"

namespace mirra::graph {

enum class DType : uint8_t { f32, f64, i32, i64, u8, boolean, bf16, f16 };

size_t dtype_size(DType dtype);
std::string_view dtype_name(DType dtype);
bool is_floating(DType dtype);

template <class T>
constexpr DType dtype_of();
template <> constexpr DType dtype_of<float>() { return DType::f32; }
template <> constexpr DType dtype_of<double>() { return DType::f64; }
template <> constexpr DType dtype_of<int32_t>() { return DType::i32; }
template <> constexpr DType dtype_of<int64_t>() { return DType::i64; }
template <> constexpr DType dtype_of<uint8_t>() { return DType::u8; }
template <> constexpr DType dtype_of<bool>() { return DType::boolean; }
template <> constexpr DType dtype_of<bfloat16>() { return DType::bf16; }
template <> constexpr DType dtype_of<float16>() { return DType::f16; }

}  // namespace mirra::graph
