// Encoded images (PNG through libpng, JPEG through libjpeg-turbo's TurboJPEG), told apart by their
// magic bytes, decoded into u8 pixels of `channels` channels (1 gray, 3 RGB, 4 RGBA; other images
// converted as TensorFlow converts them: alpha dropped or made opaque, colour to gray with ITU-R 601's
// weights), height x width x channels in row order. JPEG takes the fast integer inverse DCT, as
// tf.io.decode_jpeg does by default, so the pixels are TensorFlow's.
//
//   auto image = decode_image(bytes, 3);   // image->height, ->width, ->pixels
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "graph/status.h"

namespace mirra::runtime::data {

struct DecodedImage {
  int64_t height = 0, width = 0, channels = 0;
  std::vector<uint8_t> pixels;
};

// An error says what the bytes are not (neither PNG nor JPEG, a damaged one) without naming a file:
// callers add where the bytes came from.
graph::Expected<DecodedImage> decode_image(std::span<const std::byte> bytes, int64_t channels);

}  // namespace mirra::runtime::data
