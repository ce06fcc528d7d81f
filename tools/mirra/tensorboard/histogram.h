// A histogram as TensorBoard's HistogramProto holds it, with TensorFlow's default buckets: limits
// growing by 10% from 1e-12 to 1e20 on each side of 0 (and +-DBL_MAX at the ends), bucket i counting
// the values in [limit[i - 1], limit[i]); runs of empty buckets are written as one (TensorFlow's
// encoding), so a tensor of any size makes a message of at most a few hundred buckets. TensorBoard
// re-bins it for display. Non-finite values are left out.
//
//   Histogram h;
//   h.add(tensor);                       // f32, f64, bf16 or f16
//   HistogramProto proto = h.proto();
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "runtime/tensor.h"
#include "tools/mirra/tensorboard/summary.pb.h"

namespace mirra::runner::tensorboard {

class Histogram {
 public:
  Histogram();

  void add(double value);
  // Every element of a floating-point tensor on the host; other dtypes add nothing.
  void add(const runtime::Tensor& tensor);

  HistogramProto proto() const;

  // The bucket limits: 0, then +-1e-12 * 1.1^k below 1e20, then +-DBL_MAX.
  static const std::vector<double>& limits();

 private:
  std::vector<double> counts_;  // one per limit
  double min_, max_, sum_ = 0, sum_squares_ = 0;
  int64_t num_ = 0;
};

}  // namespace mirra::runner::tensorboard
