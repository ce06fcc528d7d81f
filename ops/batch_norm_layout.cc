// batch_norm_layout and the per-channel checks.
#include "ops/batch_norm_layout.h"

namespace mirra::ops {

bool channels_first(const std::string& data_format) { return data_format == "NCHW" || data_format == "NCDHW"; }

BatchNormLayout batch_norm_layout(const runtime::Tensor& x, const std::string& data_format) {
  const int c = channels_first(data_format) ? 1 : x.rank() - 1;
  BatchNormLayout l{1, x.dim(c), 1};
  for (int d = 0; d < x.rank(); ++d) {
    if (d < c) l.outer *= x.dim(d);
    if (d > c) l.inner *= x.dim(d);
  }
  return l;
}

graph::Status check_per_channel(const runtime::Tensor& t, const char* name, int64_t channels, bool may_be_empty) {
  if (t.rank() == 1 && (t.dim(0) == channels || (may_be_empty && t.dim(0) == 0))) return graph::Status();
  return graph::invalid_argument(std::string(name) + " must have the same number of elements as the channels of x, got " +
                                 t.shape().to_string() + " and " + std::to_string(channels));
}

}  // namespace mirra::ops
