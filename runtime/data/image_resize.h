// Bilinear resizing of u8 images into f32, as TensorFlow 2's tf.image.resize computes it by default
// (method "bilinear", half-pixel centres, no antialiasing), in float: Keras's image data sets resize
// with it, so the same files give the same values.
#pragma once

#include <cstdint>

namespace mirra::runtime::data {

// `in` holds in_height x in_width x channels bytes; `out` receives out_height x out_width x channels.
void resize_bilinear(const uint8_t* in, int64_t in_height, int64_t in_width, int64_t channels, float* out, int64_t out_height,
                     int64_t out_width);

}  // namespace mirra::runtime::data
