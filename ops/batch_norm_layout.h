// How batch normalisation's kernels (CPU and GPU) see their input: x as [outer, channels, inner], the
// channel dim at 1 or last by data format, and the run-time checks of the per-channel parameters that
// the graph's shapes left unknown. Internal to ops/.
#pragma once

#include <string>

#include "graph/status.h"
#include "runtime/tensor.h"

namespace mirra::ops {

struct BatchNormLayout {
  int64_t outer = 0, channels = 0, inner = 0;
  int64_t count() const { return outer * inner; }  // the values of one channel
};

bool channels_first(const std::string& data_format);  // NCHW, NCDHW

BatchNormLayout batch_norm_layout(const runtime::Tensor& x, const std::string& data_format);

// `t`, the input `name`, has one value per channel (or none, where `may_be_empty`).
graph::Status check_per_channel(const runtime::Tensor& t, const char* name, int64_t channels, bool may_be_empty);

}  // namespace mirra::ops
