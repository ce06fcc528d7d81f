// Tensors and shapes between the FlatBuffers form and graph::TensorValue. Reading checks the dtype,
// the rank and every dimension against limits.h, the byte count against prod(shape) * sizeof(dtype)
// (computed in 64 bits with overflow checks) and the CRC-32 of the bytes; errors name the tensor.
#pragma once

#include <flatbuffers/flatbuffers.h>

#include <string>
#include <string_view>
#include <vector>

#include "graph/attr.h"
#include "graph/status.h"
#include "serialization/mirra_generated.h"

namespace mirra::serialization {

struct NamedTensor {
  std::string name;
  graph::TensorValue value;
  friend bool operator==(const NamedTensor&, const NamedTensor&) = default;
};

uint32_t crc32_of(const std::vector<std::byte>& bytes);

// FlatBuffers' verifier checks a vector's length word but not that 8-byte elements sit on 8-byte
// boundaries; a crafted file can misalign them, so readers check this before touching the elements.
template <class T>
bool elements_aligned(const flatbuffers::Vector<T>* vector) {
  return vector == nullptr || vector->size() == 0 || reinterpret_cast<uintptr_t>(vector->Data()) % alignof(T) == 0;
}

// `allow_unknown`: -1 dims are allowed (graph shapes); otherwise every dim is >= 0 (tensors).
graph::Expected<graph::Shape> read_shape(const flatbuffers::Vector<int64_t>* dims, bool allow_unknown,
                                         std::string_view what);
graph::Expected<graph::DType> read_dtype(fb::DType dtype, std::string_view what);
fb::DType to_fb(graph::DType dtype);

// The elements of a fully defined shape, when within kMaxTensorElements.
graph::Expected<int64_t> checked_elements(const graph::Shape& shape, std::string_view what);

flatbuffers::Offset<fb::Tensor> write_tensor(flatbuffers::FlatBufferBuilder& fbb, std::string_view name,
                                             const graph::TensorValue& value);
// `what` names the tensor's place in the file ("weights[3]") for errors.
graph::Expected<NamedTensor> read_tensor(const fb::Tensor* tensor, std::string_view what);

// Bytes a builder should start with to hold `tensors` without growing (each growth copies it all).
size_t encoded_size_hint(const std::vector<NamedTensor>& tensors);

flatbuffers::Offset<flatbuffers::Vector<flatbuffers::Offset<fb::Tensor>>> write_tensors(
    flatbuffers::FlatBufferBuilder& fbb, const std::vector<NamedTensor>& tensors);
graph::Expected<std::vector<NamedTensor>> read_tensors(
    const flatbuffers::Vector<flatbuffers::Offset<fb::Tensor>>* tensors, std::string_view what);

}  // namespace mirra::serialization
