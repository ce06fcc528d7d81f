// Histogram: TensorFlow's default buckets and their run-length encoding in a HistogramProto.
#include "tools/mirra/tensorboard/histogram.h"

#include <algorithm>
#include <cfloat>
#include <cmath>

#include "graph/float16.h"

namespace mirra::runner::tensorboard {

namespace {

std::vector<double> make_limits() {
  std::vector<double> positive;
  for (double v = 1e-12; v < 1e20; v *= 1.1) positive.push_back(v);
  positive.push_back(DBL_MAX);
  std::vector<double> limits;
  limits.reserve(2 * positive.size() + 1);
  for (auto it = positive.rbegin(); it != positive.rend(); ++it) limits.push_back(-*it);
  limits.push_back(0.0);
  limits.insert(limits.end(), positive.begin(), positive.end());
  return limits;
}

template <class T>
void add_all(Histogram& h, std::span<const T> values) {
  for (const T v : values) h.add(static_cast<double>(static_cast<float>(v)));
}

}  // namespace

const std::vector<double>& Histogram::limits() {
  static const std::vector<double> limits = make_limits();
  return limits;
}

Histogram::Histogram() : counts_(limits().size(), 0.0), min_(DBL_MAX), max_(-DBL_MAX) {}

void Histogram::add(double value) {
  if (!std::isfinite(value)) return;
  const std::vector<double>& l = limits();
  // The first limit above the value closes its bucket.
  const size_t bucket = static_cast<size_t>(std::upper_bound(l.begin(), l.end(), value) - l.begin());
  counts_[std::min(bucket, counts_.size() - 1)] += 1;
  min_ = std::min(min_, value);
  max_ = std::max(max_, value);
  sum_ += value;
  sum_squares_ += value * value;
  ++num_;
}

void Histogram::add(const runtime::Tensor& tensor) {
  switch (tensor.dtype()) {
    case graph::DType::f32: add_all(*this, tensor.values<float>()); break;
    case graph::DType::f64:
      for (const double v : tensor.values<double>()) add(v);
      break;
    case graph::DType::bf16: add_all(*this, tensor.values<graph::bfloat16>()); break;
    case graph::DType::f16: add_all(*this, tensor.values<graph::float16>()); break;
    default: break;
  }
}

HistogramProto Histogram::proto() const {
  HistogramProto proto;
  proto.set_min(num_ > 0 ? min_ : 0.0);
  proto.set_max(num_ > 0 ? max_ : 0.0);
  proto.set_num(static_cast<double>(num_));
  proto.set_sum(sum_);
  proto.set_sum_squares(sum_squares_);
  const std::vector<double>& l = limits();
  for (size_t i = 0; i < counts_.size();) {
    double limit = l[i];
    const double count = counts_[i++];
    // A run of empty buckets is one empty bucket up to the run's last limit.
    if (count == 0) {
      while (i < counts_.size() && counts_[i] == 0) limit = l[i++];
    }
    proto.add_bucket_limit(limit);
    proto.add_bucket(count);
  }
  return proto;
}

}  // namespace mirra::runner::tensorboard
