// Tensor and shape encoding with bounds, exact sizes and checksums.
#include "serialization/tensor_codec.h"

#include <zlib.h>

#include <set>

#include "serialization/limits.h"

namespace mirra::serialization {

namespace {

graph::Status error(std::string_view what, const std::string& message) {
  return graph::invalid_argument(std::string(what) + ": " + message);
}

}  // namespace

uint32_t crc32_of(const std::vector<std::byte>& bytes) {
  uLong crc = crc32(0L, Z_NULL, 0);
  const auto* data = reinterpret_cast<const Bytef*>(bytes.data());
  size_t left = bytes.size();
  while (left > 0) {  // zlib takes 32-bit lengths
    const uInt chunk = static_cast<uInt>(std::min<size_t>(left, 1u << 30));
    crc = crc32(crc, data, chunk);
    data += chunk;
    left -= chunk;
  }
  return static_cast<uint32_t>(crc);
}

graph::Expected<graph::Shape> read_shape(const flatbuffers::Vector<int64_t>* dims, bool allow_unknown,
                                         std::string_view what) {
  graph::Shape shape;
  if (dims == nullptr) return shape;
  if (!elements_aligned(dims)) return error(what, "misaligned shape vector");
  if (dims->size() > static_cast<uint32_t>(kMaxRank)) {
    return error(what, "rank " + std::to_string(dims->size()) + " exceeds " + std::to_string(kMaxRank));
  }
  for (uint32_t i = 0; i < dims->size(); ++i) {
    const int64_t d = dims->Get(i);
    if (d < (allow_unknown ? -1 : 0) || d > kMaxDim) {
      return error(what, "dimension " + std::to_string(i) + " is " + std::to_string(d) + ", outside [" +
                             (allow_unknown ? "-1" : "0") + ", " + std::to_string(kMaxDim) + "]");
    }
    shape.dims.push_back(d);
  }
  int64_t known = 1;  // the product of the known dims stays bounded too
  for (int64_t d : shape.dims) {
    if (d >= 0 && (__builtin_mul_overflow(known, d, &known) || known > kMaxTensorElements)) {
      return error(what, "shape " + shape.to_string() + " holds more than " + std::to_string(kMaxTensorElements) +
                             " elements");
    }
  }
  return shape;
}

graph::Expected<graph::DType> read_dtype(fb::DType dtype, std::string_view what) {
  if (dtype < fb::DType::MIN || dtype > fb::DType::MAX) {
    return error(what, "dtype " + std::to_string(static_cast<int>(dtype)) + " is not known");
  }
  return static_cast<graph::DType>(dtype);
}

fb::DType to_fb(graph::DType dtype) { return static_cast<fb::DType>(dtype); }

graph::Expected<int64_t> checked_elements(const graph::Shape& shape, std::string_view what) {
  const std::optional<int64_t> count = shape.num_elements();
  if (!count || *count > kMaxTensorElements) {
    return error(what, "shape " + shape.to_string() + " is not a bounded, fully defined shape");
  }
  return *count;
}

flatbuffers::Offset<fb::Tensor> write_tensor(flatbuffers::FlatBufferBuilder& fbb, std::string_view name,
                                             const graph::TensorValue& value) {
  const auto& bytes = *value.bytes;
  fbb.ForceVectorAlignment(bytes.size(), 1, 64);
  const auto data = fbb.CreateVector(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  const auto shape = fbb.CreateVector(value.type.shape.dims);
  const auto name_offset = fbb.CreateString(name.data(), name.size());
  return fb::CreateTensor(fbb, name_offset, to_fb(value.type.dtype), shape, data, crc32_of(bytes));
}

graph::Expected<NamedTensor> read_tensor(const fb::Tensor* tensor, std::string_view what) {
  if (tensor == nullptr) return error(what, "missing tensor");
  NamedTensor out;
  if (tensor->name() != nullptr) out.name = tensor->name()->str();
  const std::string where = out.name.empty() ? std::string(what) : std::string(what) + " '" + out.name + "'";
  MIRRA_ASSIGN_OR_RETURN(const graph::DType dtype, read_dtype(tensor->dtype(), where));
  MIRRA_ASSIGN_OR_RETURN(graph::Shape shape, read_shape(tensor->shape(), /*allow_unknown=*/false, where));
  MIRRA_ASSIGN_OR_RETURN(const int64_t elements, checked_elements(shape, where));
  uint64_t expected = 0;
  if (__builtin_mul_overflow(static_cast<uint64_t>(elements), graph::dtype_size(dtype), &expected)) {
    return error(where, "byte size overflows");
  }
  const uint64_t present = tensor->data() == nullptr ? 0 : tensor->data()->size();
  if (present != expected) {
    return error(where, "holds " + std::to_string(present) + " bytes, but " + graph::dtype_name(dtype).data() +
                            shape.to_string() + " needs " + std::to_string(expected));
  }
  const auto* first = present > 0 ? reinterpret_cast<const std::byte*>(tensor->data()->data()) : nullptr;
  auto bytes = std::make_shared<std::vector<std::byte>>(first, first + present);  // no zero fill first
  if (crc32_of(*bytes) != tensor->crc32()) return error(where, "checksum mismatch (the data is corrupted)");
  out.value = graph::TensorValue{graph::TensorType{dtype, std::move(shape)}, std::move(bytes)};
  return out;
}

size_t encoded_size_hint(const std::vector<NamedTensor>& tensors) {
  size_t bytes = 0;
  for (const NamedTensor& t : tensors) bytes += t.value.bytes->size() + t.name.size() + 64 * 3;
  return bytes;
}

flatbuffers::Offset<flatbuffers::Vector<flatbuffers::Offset<fb::Tensor>>> write_tensors(
    flatbuffers::FlatBufferBuilder& fbb, const std::vector<NamedTensor>& tensors) {
  std::vector<flatbuffers::Offset<fb::Tensor>> offsets;
  offsets.reserve(tensors.size());
  for (const NamedTensor& t : tensors) offsets.push_back(write_tensor(fbb, t.name, t.value));
  return fbb.CreateVector(offsets);
}

graph::Expected<std::vector<NamedTensor>> read_tensors(
    const flatbuffers::Vector<flatbuffers::Offset<fb::Tensor>>* tensors, std::string_view what) {
  std::vector<NamedTensor> out;
  if (tensors == nullptr) return out;
  std::set<std::string, std::less<>> names;
  for (uint32_t i = 0; i < tensors->size(); ++i) {
    const std::string where = std::string(what) + "[" + std::to_string(i) + "]";
    MIRRA_ASSIGN_OR_RETURN(NamedTensor tensor, read_tensor(tensors->Get(i), where));
    if (tensor.name.empty()) return error(where, "has no name");
    if (!names.insert(tensor.name).second) return error(where, "repeats the name '" + tensor.name + "'");
    out.push_back(std::move(tensor));
  }
  return out;
}

}  // namespace mirra::serialization
