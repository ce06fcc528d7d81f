// fill_buckets: consecutive tensors up to a byte size.
#include "strategies/gradient_buckets.h"

namespace mirra::strategies {

std::vector<std::vector<size_t>> fill_buckets(const std::vector<size_t>& order, const std::vector<int64_t>& bytes,
                                              const BucketSizes& sizes) {
  std::vector<std::vector<size_t>> buckets(1);
  int64_t held = 0;
  for (size_t j : order) {
    held += bytes[j];
    buckets.back().push_back(j);
    if (held >= (buckets.size() == 1 ? sizes.first_bucket_bytes : sizes.bucket_bytes)) {
      buckets.emplace_back();
      held = 0;
    }
  }
  if (buckets.back().empty()) buckets.pop_back();
  return buckets;
}

}  // namespace mirra::strategies
