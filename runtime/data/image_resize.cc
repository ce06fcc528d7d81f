// resize_bilinear: TensorFlow's half-pixel-centre weights per output row and column, then the lerps in
// its order (across the row, then down), each in float.
#include "runtime/data/image_resize.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace mirra::runtime::data {

namespace {

struct Weight {
  int64_t lower = 0, upper = 0;
  float lerp = 0;
};

// For each of `out` positions: the two input positions it lies between and how far along.
std::vector<Weight> weights(int64_t in, int64_t out) {
  const float scale = static_cast<float>(in) / static_cast<float>(out);
  std::vector<Weight> w(static_cast<size_t>(out));
  for (int64_t i = 0; i < out; ++i) {
    const float at = (static_cast<float>(i) + 0.5f) * scale - 0.5f;
    const float floor = std::floor(at);
    w[static_cast<size_t>(i)] = {.lower = std::max<int64_t>(static_cast<int64_t>(floor), 0),
                                 .upper = std::min<int64_t>(static_cast<int64_t>(std::ceil(at)), in - 1),
                                 .lerp = at - floor};
  }
  return w;
}

}  // namespace

void resize_bilinear(const uint8_t* in, int64_t in_height, int64_t in_width, int64_t channels, float* out, int64_t out_height,
                     int64_t out_width) {
  const std::vector<Weight> ys = weights(in_height, out_height), xs = weights(in_width, out_width);
  const auto at = [&](int64_t y, int64_t x, int64_t c) { return static_cast<float>(in[(y * in_width + x) * channels + c]); };
  for (int64_t y = 0; y < out_height; ++y) {
    const Weight& wy = ys[static_cast<size_t>(y)];
    for (int64_t x = 0; x < out_width; ++x) {
      const Weight& wx = xs[static_cast<size_t>(x)];
      for (int64_t c = 0; c < channels; ++c) {
        const float top_left = at(wy.lower, wx.lower, c), top_right = at(wy.lower, wx.upper, c);
        const float bottom_left = at(wy.upper, wx.lower, c), bottom_right = at(wy.upper, wx.upper, c);
        const float top = top_left + (top_right - top_left) * wx.lerp;
        const float bottom = bottom_left + (bottom_right - bottom_left) * wx.lerp;
        out[(y * out_width + x) * channels + c] = top + (bottom - top) * wy.lerp;
      }
    }
  }
}

}  // namespace mirra::runtime::data
