// Image augmentation on the input pipeline, the CIFAR/ResNet recipe: a random crop after zero padding
// and a random horizontal flip. Each example's draws come from a generator seeded by (seed, epoch,
// example index in the data set), so an augmented batch is the same bytes whatever the batch size,
// shard, replica or worker count, and every epoch sees other crops.
//
//   ImageAugmentation augmentation{.crop_padding = 4, .horizontal_flip = true};
//   augment_image(bytes, out, {28, 28, 1}, augmentation, {.seed = 7, .epoch = 0, .example = 123});
#pragma once

#include <cstdint>

#include "graph/status.h"

namespace mirra::runtime::data {

struct ImageAugmentation {
  // > 0: pad each side with this many zero pixels, then crop the image's size back at an offset drawn
  // uniformly from [0, 2 * crop_padding] in each direction (torchvision's RandomCrop(padding)).
  int64_t crop_padding = 0;
  bool horizontal_flip = false;  // mirror left to right with probability 1/2
  bool enabled() const { return crop_padding > 0 || horizontal_flip; }
};

struct ImageShape {
  int64_t height = 0, width = 0, channels = 1;  // values in height x width x channels order
  int64_t value_bytes = 1;                      // of each value: 1 for u8 pixels, 4 for f32 ones
};

// Which draw: the data set's seed, the epoch and the example's index in the data set.
struct AugmentationDraw {
  uint64_t seed = 0;
  int64_t epoch = 0;
  int64_t example = 0;
};

// The padding must be at most 1 << 20 pixels.
graph::Status check_augmentation(const ImageAugmentation& augmentation);

// Writes the augmented image into `out` (as many bytes as `image`; they must not overlap). Padding is
// zero bytes: 0 for integers, 0.0 for floats.
void augment_image(const uint8_t* image, uint8_t* out, const ImageShape& shape, const ImageAugmentation& augmentation,
                   const AugmentationDraw& draw);

}  // namespace mirra::runtime::data
