// Buffer and Tensor.
#include "runtime/tensor.h"

#include <cstring>

#include "runtime/memory_budget.h"

namespace mirra::runtime {

std::string TensorShape::to_string() const {
  std::string out = "[";
  for (int i = 0; i < rank_; ++i) {
    if (i > 0) out += ",";
    out += std::to_string(dims_[static_cast<size_t>(i)]);
  }
  return out + "]";
}

Buffer::Buffer(std::shared_ptr<Allocator> allocator, size_t bytes)
    : allocator_(std::move(allocator)), data_(allocator_->allocate(bytes)), bytes_(bytes),
      space_(allocator_->memory_space()) {}

Buffer::~Buffer() { allocator_->deallocate(data_, bytes_); }

void Tensor::throw_access_error() const {
  throw MemorySpaceError("a " + type_string() + " tensor in " + memory_space().to_string() +
                         " was touched by code that may not touch it (host code reading device memory, or a "
                         "device's work reading another's); a copy between memory spaces is missing");
}

Tensor::Tensor(DType dtype, const TensorShape& shape, std::shared_ptr<Buffer> buffer, size_t byte_offset)
    : dtype_(dtype), shape_(shape), buffer_(std::move(buffer)), offset_(byte_offset) {
  MIRRA_CHECK(buffer_ == nullptr || offset_ + byte_size() <= buffer_->size(), "tensor exceeds its buffer");
}

Tensor Tensor::empty(const std::shared_ptr<Allocator>& allocator, DType dtype, const TensorShape& shape) {
  // Run-time dims (a batch) can make a size no graph check saw: one past 2^48 bytes (256 TiB, more
  // than any machine has; glibc's aligned malloc fails an internal assertion on requests near 2^62
  // instead of returning null) is a failed allocation, which the executor reports as resource_exhausted.
  constexpr size_t kMaxBytes = size_t{1} << 48;
  size_t bytes = graph::dtype_size(dtype);
  bool overflow = false, empty = false;
  for (int64_t d : shape.dims()) {
    MIRRA_CHECK(d >= 0, "negative dim in a run-time shape");
    overflow |= __builtin_mul_overflow(bytes, static_cast<size_t>(d), &bytes);
    empty |= d == 0;
  }
  if (empty) {
    bytes = 0;  // a zero dim makes an empty tensor, whatever the others
  } else if (overflow || bytes > kMaxBytes) {
    throw OutOfMemory("a tensor of " + std::string(graph::dtype_name(dtype)) + shape.to_string() +
                      " would have more than 2^48 bytes");
  }
  return Tensor(dtype, shape, std::make_shared<Buffer>(allocator, bytes));
}

Tensor Tensor::reshaped(const TensorShape& shape) const {
  MIRRA_CHECK(shape.num_elements() == num_elements(), "reshape changes the element count");
  return Tensor(dtype_, shape, buffer_, offset_);
}

Tensor Tensor::rows(int64_t first, int64_t count) const {
  MIRRA_CHECK(rank() > 0 && first >= 0 && count >= 0 && first + count <= dim(0), "rows out of range");
  TensorShape shape = shape_;
  shape.set_dim(0, count);
  const size_t row_bytes = dim(0) == 0 ? 0 : byte_size() / static_cast<size_t>(dim(0));
  return Tensor(dtype_, shape, buffer_, offset_ + static_cast<size_t>(first) * row_bytes);
}

std::string Tensor::type_string() const { return std::string(graph::dtype_name(dtype_)) + shape_.to_string(); }

Tensor host_copy(const Tensor& tensor, const std::shared_ptr<Allocator>& allocator) {
  Tensor copy = Tensor::empty(allocator, tensor.dtype(), tensor.shape());
  if (tensor.byte_size() > 0) std::memcpy(copy.mutable_raw_data(), tensor.raw_data(), tensor.byte_size());
  return copy;
}

graph::TensorValue to_tensor_value(const Tensor& tensor) {
  const auto* first = static_cast<const std::byte*>(tensor.byte_size() > 0 ? tensor.raw_data() : nullptr);
  auto bytes = std::make_shared<std::vector<std::byte>>(first, first + tensor.byte_size());
  return graph::TensorValue{graph::TensorType{tensor.dtype(), graph::Shape(tensor.shape().to_vector())}, std::move(bytes)};
}

Tensor from_tensor_value(const graph::TensorValue& value) {
  Tensor tensor = Tensor::empty(host_allocator(), value.type.dtype, TensorShape(value.type.shape.dims));
  if (tensor.byte_size() > 0) std::memcpy(tensor.mutable_raw_data(), value.bytes->data(), tensor.byte_size());
  return tensor;
}

}  // namespace mirra::runtime
