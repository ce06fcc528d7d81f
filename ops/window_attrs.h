// Schema checks shared by the windowed ops: 2-element bounded positive int lists, padding (and the
// convolutions' explicit_paddings) and data_format, and the inferred output shape.
#pragma once

#include <string>
#include <vector>

#include "ops/shape_inference.h"

namespace mirra::ops {

// Bounded so that window arithmetic ((window - 1) * dilation + 1, ...) cannot overflow.
inline Status check_pair(const InferContext& ctx, const char* name) {
  constexpr int64_t kMax = int64_t{1} << 31;
  const auto& values = ctx.attr<std::vector<int64_t>>(name);
  if (values.size() != 2 || values[0] < 1 || values[1] < 1 || values[0] > kMax || values[1] > kMax) {
    return ctx.error(std::string(name) + " must be two integers in [1, 2^31] [height, width]");
  }
  return Status();
}

// oneDNN's cost of setting up a windowed op grows with the padding, which SAME padding makes as wide
// as the window: a dilated window of 2^27 took minutes. No real model comes near this bound.
inline constexpr int64_t kMaxWindowExtent = int64_t{1} << 16;

// The window as dilated, (window - 1) * dilation + 1, along each spatial dim is at most kMaxWindowExtent.
inline Status check_window_extent(const InferContext& ctx, int64_t window_h, int64_t window_w,
                                  const std::vector<int64_t>& dilations) {
  // Window dims and dilations are each at most 2^31 (check_pair, fully defined filters), so the
  // products fit in int64.
  if ((window_h - 1) * dilations[0] + 1 > kMaxWindowExtent || (window_w - 1) * dilations[1] + 1 > kMaxWindowExtent) {
    return ctx.error("the window, dilated, spans more than 65536 elements along a spatial dim");
  }
  return Status();
}

// padding SAME or VALID, or with `explicit_allowed` (the convolutions, which have explicit_paddings:
// TensorFlow's Conv2D) EXPLICIT: 8 amounts, two per dim in data_format order, none on the batch or
// channel dims, none negative, and none when padding is not EXPLICIT.
inline Status check_padding_and_format(const InferContext& ctx, bool explicit_allowed = false) {
  const auto& padding = ctx.attr<std::string>("padding");
  const auto& format = ctx.attr<std::string>("data_format");
  if (format != "NHWC" && format != "NCHW") return ctx.error("data_format must be NHWC or NCHW");
  if (!explicit_allowed) {
    if (padding != "SAME" && padding != "VALID") return ctx.error("padding must be SAME or VALID");
    return Status();
  }
  if (padding != "SAME" && padding != "VALID" && padding != "EXPLICIT") return ctx.error("padding must be SAME, VALID or EXPLICIT");
  const auto& amounts = ctx.attr<std::vector<int64_t>>("explicit_paddings");
  if (padding != "EXPLICIT") {
    if (!amounts.empty()) return ctx.error("explicit_paddings must be empty unless padding is EXPLICIT");
    return Status();
  }
  if (amounts.size() != 8) return ctx.error("explicit_paddings must hold 8 amounts (two per dim), not " + std::to_string(amounts.size()));
  const size_t channel = format == "NCHW" ? 1 : 3;
  for (size_t i = 0; i < 8; ++i) {
    if (amounts[i] < 0 || amounts[i] > kMaxWindowExtent) return ctx.error("explicit_paddings must be in [0, 65536]");
    if ((i / 2 == 0 || i / 2 == channel) && amounts[i] != 0) {
      return ctx.error("explicit_paddings must not pad the batch or channel dims");
    }
  }
  return Status();
}

// EXPLICIT padding narrower than the dilated window along each dim (oneDNN's convolutions read
// nothing but padding otherwise, which they do not take).
inline Status check_explicit_padding_fits(const InferContext& ctx, int64_t window_h, int64_t window_w,
                                          const std::vector<int64_t>& dilations) {
  const WindowPadding p = WindowPadding::of(ctx.node().attrs);
  if (!p.is_explicit) return Status();
  const int64_t extent_h = (window_h - 1) * dilations[0] + 1, extent_w = (window_w - 1) * dilations[1] + 1;
  if (p.top >= extent_h || p.bottom >= extent_h || p.left >= extent_w || p.right >= extent_w) {
    return ctx.error("explicit_paddings must be narrower than the window (" + std::to_string(extent_h) + "x" +
                     std::to_string(extent_w) + ", dilated) along each dim; a Pad before the convolution pads more");
  }
  return Status();
}

// Output shape of a windowed op over input 0 (rank 4, checked by the caller).
inline Shape window_output_shape(const InferContext& ctx, int64_t window_h, int64_t window_w,
                                 const std::vector<int64_t>& dilations, int64_t out_channels) {
  const Shape& in = ctx.input(0).shape;
  const bool nchw = ctx.attr<std::string>("data_format") == "NCHW";
  const WindowPadding padding = WindowPadding::of(ctx.node().attrs);
  const auto& strides = ctx.attr<std::vector<int64_t>>("strides");
  const int64_t h = padding.output_dim(0, in.dim(nchw ? 2 : 1), window_h, strides[0], dilations[0]);
  const int64_t w = padding.output_dim(1, in.dim(nchw ? 3 : 2), window_w, strides[1], dilations[1]);
  return nchw ? Shape{in.dim(0), out_channels, h, w} : Shape{in.dim(0), h, w, out_channels};
}

// The named attributes of `node`, for a gradient op that takes its forward op's geometry.
inline graph::AttrMap copy_attrs(const graph::Node& node, std::initializer_list<const char*> names) {
  graph::AttrMap attrs;
  for (const char* name : names) attrs.set(name, *node.attrs.find(name));
  return attrs;
}

}  // namespace mirra::ops
