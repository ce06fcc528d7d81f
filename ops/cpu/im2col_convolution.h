// Conv2D's three directions as matrix products over unfolded input patches (im2col + gemm), for the
// element type oneDNN has no convolutions for (f64, through OpenBLAS's dgemm). Data in NHWC or NCHW,
// filters HWIO, any stride, dilation and padding; results do not depend on the thread count.
#pragma once

#include <cstdint>
#include <memory>

#include "ops/cpu/window_geometry.h"
#include "runtime/allocator.h"

namespace mirra::ops::cpu {

// A convolution's geometry with its filter's window and output channels.
struct UnfoldedConvolution {
  WindowGeometry g;
  int64_t filter_height = 0, filter_width = 0, out_channels = 0;
  bool nchw = false;
  std::shared_ptr<runtime::Allocator> scratch;  // for the unfolded patches
};

// output = input (*) filter.
void im2col_conv2d_forward(const UnfoldedConvolution& c, const double* input, const double* filter, double* output);
// dx = d loss / d input, given dy (d loss / d output).
void im2col_conv2d_backward_data(const UnfoldedConvolution& c, const double* dy, const double* filter, double* dx);
// dw = d loss / d filter (HWIO), given the input and dy.
void im2col_conv2d_backward_filter(const UnfoldedConvolution& c, const double* input, const double* dy, double* dw);

}  // namespace mirra::ops::cpu
