// WindowGeometry: sizes, strides and padding of a 2-D windowed op (conv or pool) on a concrete input,
// in oneDNN's terms (logical NCHW dims), computed once by conv and pool kernels alike.
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

#include "ops/shape_inference.h"
#include "runtime/tensor.h"

namespace mirra::ops::cpu {

struct WindowGeometry {
  int64_t batch, channels, height, width;
  int64_t out_height, out_width;
  dnnl::memory::dims strides, dilations /* oneDNN's: d - 1 */, pad_before, pad_after;
  dnnl::memory::format_tag layout;

  static WindowGeometry make(const runtime::Tensor& input, bool nchw, int64_t window_h, int64_t window_w,
                             const std::vector<int64_t>& strides, const std::vector<int64_t>& dilations,
                             const WindowPadding& padding) {
    WindowGeometry g;
    g.batch = input.dim(0);
    g.channels = input.dim(nchw ? 1 : 3);
    g.height = input.dim(nchw ? 2 : 1);
    g.width = input.dim(nchw ? 3 : 2);
    g.out_height = padding.output_dim(0, g.height, window_h, strides[0], dilations[0]);
    g.out_width = padding.output_dim(1, g.width, window_w, strides[1], dilations[1]);
    const int64_t ph = padding.before(0, g.height, g.out_height, window_h, strides[0], dilations[0]);
    const int64_t pw = padding.before(1, g.width, g.out_width, window_w, strides[1], dilations[1]);
    const int64_t eff_h = (window_h - 1) * dilations[0] + 1;
    const int64_t eff_w = (window_w - 1) * dilations[1] + 1;
    g.strides = {strides[0], strides[1]};
    g.dilations = {dilations[0] - 1, dilations[1] - 1};
    g.pad_before = {ph, pw};
    // What the last window reaches past the input (EXPLICIT's rows beyond it are never read).
    g.pad_after = {std::max<int64_t>((g.out_height - 1) * strides[0] + eff_h - g.height - ph, 0),
                   std::max<int64_t>((g.out_width - 1) * strides[1] + eff_w - g.width - pw, 0)};
    g.layout = nchw ? dnnl::memory::format_tag::nchw : dnnl::memory::format_tag::nhwc;
    return g;
  }

  runtime::TensorShape output_shape(bool nchw, int64_t out_channels) const {
    return nchw ? runtime::TensorShape{batch, out_channels, out_height, out_width}
                : runtime::TensorShape{batch, out_height, out_width, out_channels};
  }
};

}  // namespace mirra::ops::cpu
