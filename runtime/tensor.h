// Tensor: a dtype, a concrete shape and a ref-counted, 64-byte-aligned buffer (shared, not copied,
// when a tensor is copied). Kernels read inputs through data<T>() and write outputs they allocated
// through mutable_data<T>(). A buffer knows its memory space; touching its bytes from a thread that
// may not (host code on device memory, runtime/memory_space.h) throws MemorySpaceError.
#pragma once

#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "graph/attr.h"
#include "graph/dtype.h"
#include "runtime/allocator.h"
#include "runtime/tensor_shape.h"

namespace mirra::runtime {

using graph::DType;

// A block of device memory, returned to its allocator when the last tensor using it goes away.
class Buffer {
 public:
  Buffer(std::shared_ptr<Allocator> allocator, size_t bytes);
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  void* data() const { return data_; }
  size_t size() const { return bytes_; }
  const MemorySpace& memory_space() const { return space_; }
  bool page_locked() const { return allocator_->page_locked(); }

 private:
  std::shared_ptr<Allocator> allocator_;
  void* data_;
  size_t bytes_;
  MemorySpace space_;
};

class Tensor {
 public:
  Tensor() = default;
  Tensor(DType dtype, const TensorShape& shape, std::shared_ptr<Buffer> buffer, size_t byte_offset = 0);

  // Uninitialised memory from `allocator`.
  static Tensor empty(const std::shared_ptr<Allocator>& allocator, DType dtype, const TensorShape& shape);
  // A host tensor holding `values`; its size must match the shape.
  template <class T>
  static Tensor from(const TensorShape& shape, std::span<const T> values);
  template <class T>
  static Tensor from(const TensorShape& shape, std::initializer_list<T> values) {
    return from<T>(shape, std::span<const T>(values.begin(), values.size()));
  }
  template <class T>
  static Tensor scalar(T value) {
    return from<T>(TensorShape{}, std::span<const T>(&value, 1));
  }

  bool defined() const { return buffer_ != nullptr; }
  DType dtype() const { return dtype_; }
  const TensorShape& shape() const { return shape_; }
  int rank() const { return shape_.rank(); }
  int64_t dim(int i) const { return shape_.dim(i); }
  int64_t num_elements() const { return shape_.num_elements(); }
  size_t byte_size() const { return static_cast<size_t>(num_elements()) * graph::dtype_size(dtype_); }
  const std::shared_ptr<Buffer>& buffer() const { return buffer_; }

  const MemorySpace& memory_space() const { return buffer_->memory_space(); }
  // Whether both view the same bytes (no access to them needed).
  bool same_bytes(const Tensor& other) const {
    return defined() && other.defined() && buffer_->data() == other.buffer_->data() && offset_ == other.offset_;
  }
  // The bytes, for a thread that may touch them (MemorySpaceError otherwise).
  const void* raw_data() const {
    check_access();
    return static_cast<const std::byte*>(buffer_->data()) + offset_;
  }
  void* mutable_raw_data() {
    check_access();
    return static_cast<std::byte*>(buffer_->data()) + offset_;
  }
  template <class T>
  const T* data() const {
    MIRRA_CHECK(graph::dtype_of<T>() == dtype_, "tensor dtype mismatch");
    return static_cast<const T*>(raw_data());
  }
  template <class T>
  T* mutable_data() {
    MIRRA_CHECK(graph::dtype_of<T>() == dtype_, "tensor dtype mismatch");
    return static_cast<T*>(mutable_raw_data());
  }
  template <class T>
  std::span<const T> values() const {
    return {data<T>(), static_cast<size_t>(num_elements())};
  }
  template <class T>
  std::vector<T> to_vector() const {
    auto v = values<T>();
    return {v.begin(), v.end()};
  }

  // The same bytes seen with another shape of the same element count.
  Tensor reshaped(const TensorShape& shape) const;
  // Rows [first, first + count) along dim 0, sharing this tensor's buffer (no copy).
  Tensor rows(int64_t first, int64_t count) const;
  // "f32[2,3]"
  std::string type_string() const;

 private:
  void check_access() const {
    if (!may_touch(buffer_->memory_space())) [[unlikely]] throw_access_error();
  }
  [[noreturn]] void throw_access_error() const;

  DType dtype_ = DType::f32;
  TensorShape shape_;
  std::shared_ptr<Buffer> buffer_;
  size_t offset_ = 0;
};

template <class T>
Tensor Tensor::from(const TensorShape& shape, std::span<const T> values) {
  MIRRA_CHECK(static_cast<int64_t>(values.size()) == shape.num_elements(), "value count does not match shape");
  Tensor tensor = empty(host_allocator(), graph::dtype_of<T>(), shape);
  if (!values.empty()) std::memcpy(tensor.mutable_raw_data(), values.data(), values.size_bytes());
  return tensor;
}

// A host tensor's values in a buffer of their own, from `allocator`: later writes to the original
// (a variable updated in place) leave the copy as it is.
Tensor host_copy(const Tensor& tensor, const std::shared_ptr<Allocator>& allocator = host_allocator());

// Copies between a run-time tensor and a graph constant (model weights, checkpoint entries).
graph::TensorValue to_tensor_value(const Tensor& tensor);
Tensor from_tensor_value(const graph::TensorValue& value);

}  // namespace mirra::runtime
