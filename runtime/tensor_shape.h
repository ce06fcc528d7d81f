// TensorShape: the concrete dimensions of a run-time tensor, stored inline (rank <= kMaxRank) so that
// making and copying tensors on the hot path never allocates for the shape.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <vector>

#include "graph/check.h"

namespace mirra::runtime {

inline constexpr int kMaxRank = 8;

class TensorShape {
 public:
  TensorShape() = default;
  TensorShape(std::initializer_list<int64_t> dims) : TensorShape(std::span<const int64_t>(dims.begin(), dims.size())) {}
  explicit TensorShape(std::span<const int64_t> dims) : rank_(static_cast<uint8_t>(dims.size())) {
    MIRRA_CHECK(dims.size() <= kMaxRank, "tensor rank above kMaxRank");
    std::copy(dims.begin(), dims.end(), dims_.begin());
  }
  explicit TensorShape(const std::vector<int64_t>& dims) : TensorShape(std::span<const int64_t>(dims)) {}

  int rank() const { return rank_; }
  int64_t dim(int i) const { return dims_[static_cast<size_t>(i)]; }
  int64_t operator[](int i) const { return dim(i); }
  void set_dim(int i, int64_t value) { dims_[static_cast<size_t>(i)] = value; }
  std::span<const int64_t> dims() const { return {dims_.data(), rank_}; }
  std::vector<int64_t> to_vector() const { return {dims_.begin(), dims_.begin() + rank_}; }
  int64_t num_elements() const {
    int64_t n = 1;
    for (int i = 0; i < rank_; ++i) n *= dims_[static_cast<size_t>(i)];
    return n;
  }
  // "[2,3]"
  std::string to_string() const;

  friend bool operator==(const TensorShape& a, const TensorShape& b) {
    return a.rank_ == b.rank_ && std::equal(a.dims_.begin(), a.dims_.begin() + a.rank_, b.dims_.begin());
  }

 private:
  std::array<int64_t, kMaxRank> dims_{};
  uint8_t rank_ = 0;
};

}  // namespace mirra::runtime
