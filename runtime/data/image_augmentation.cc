// augment_image: the per-example generator, then one pass that crops, pads and flips row by row.
#include "runtime/data/image_augmentation.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "runtime/random.h"

namespace mirra::runtime::data {

namespace {

constexpr uint64_t kAugmentationStream = 0x61756D656E74ull;  // apart from the shuffle's generator

}  // namespace

graph::Status check_augmentation(const ImageAugmentation& augmentation) {
  if (augmentation.crop_padding < 0 || augmentation.crop_padding > (int64_t{1} << 20)) {
    return graph::invalid_argument("crop padding " + std::to_string(augmentation.crop_padding) +
                                   " is not in [0, 1048576]");
  }
  return graph::Status();
}

void augment_image(const uint8_t* image, uint8_t* out, const ImageShape& shape, const ImageAugmentation& augmentation,
                   const AugmentationDraw& draw) {
  // (seed, epoch, example) -> one well-mixed generator seed.
  const auto mix = Random::mix;
  Random rng(mix(mix(mix(draw.seed ^ kAugmentationStream) + static_cast<uint64_t>(draw.epoch)) +
                 static_cast<uint64_t>(draw.example)));
  const int64_t p = augmentation.crop_padding;
  // The crop's top-left corner in the padded image, moved back to the image's coordinates.
  const int64_t dy = p > 0 ? static_cast<int64_t>(rng.below(static_cast<uint64_t>(2 * p + 1))) - p : 0;
  const int64_t dx = p > 0 ? static_cast<int64_t>(rng.below(static_cast<uint64_t>(2 * p + 1))) - p : 0;
  const bool flip = augmentation.horizontal_flip && (rng.next() >> 63) != 0;
  const int64_t c = shape.channels * shape.value_bytes, row_bytes = shape.width * c;  // bytes per pixel, per row
  // The output columns [first, last) read the image's columns x + dx; the rest are padding.
  const int64_t first = std::clamp<int64_t>(-dx, 0, shape.width), last = std::clamp<int64_t>(shape.width - dx, 0, shape.width);
  for (int64_t y = 0; y < shape.height; ++y) {
    uint8_t* row = out + y * row_bytes;
    const int64_t source_y = y + dy;
    if (source_y < 0 || source_y >= shape.height || first >= last) {
      std::memset(row, 0, static_cast<size_t>(row_bytes));
      continue;
    }
    std::memset(row, 0, static_cast<size_t>(first * c));
    std::memcpy(row + first * c, image + source_y * row_bytes + (first + dx) * c, static_cast<size_t>((last - first) * c));
    std::memset(row + last * c, 0, static_cast<size_t>((shape.width - last) * c));
    if (!flip) continue;
    for (int64_t left = 0, right = shape.width - 1; left < right; ++left, --right) {
      std::swap_ranges(row + left * c, row + (left + 1) * c, row + right * c);
    }
  }
}

}  // namespace mirra::runtime::data
