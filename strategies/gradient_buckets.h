// Gradient buckets: gradients taken in the order they become ready and grouped until a bucket holds
// `first_bucket_bytes` (the first bucket, small, so its collective starts early in the backward pass)
// or `bucket_bytes` (the others). One collective then carries many small tensors: fewer calls, each
// paying its latency once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace mirra::strategies {

struct BucketSizes {
  int64_t first_bucket_bytes = int64_t{1} << 20;
  int64_t bucket_bytes = int64_t{25} << 20;
};

// The buckets of the tensors `order` lists (indices into `bytes`, each tensor's size), in that order;
// none is empty.
std::vector<std::vector<size_t>> fill_buckets(const std::vector<size_t>& order, const std::vector<int64_t>& bytes,
                                              const BucketSizes& sizes);

}  // namespace mirra::strategies
