// Image augmentation: each augmented image is the original shifted by a crop offset within the
// padding (zeros where it reads outside), mirrored or not, every offset and flip drawn; float images
// move as u8 ones; the same example in the same epoch gets the same bytes whatever the batch size and
// shard count, another epoch other ones; bad settings are errors.
#include <doctest/doctest.h>

#include <map>
#include <set>
#include <tuple>

#include "runtime/data/dataset.h"
#include "runtime/data/fashion_mnist.h"
#include "runtime/data/image_augmentation.h"

namespace mirra::runtime::data {
namespace {

constexpr ImageShape kShape{.height = 5, .width = 6, .channels = 2};

// Bytes 1..60, all distinct and none zero, so padding and every moved pixel can be told apart.
std::vector<uint8_t> distinct_image() {
  std::vector<uint8_t> image(static_cast<size_t>(kShape.height * kShape.width * kShape.channels));
  for (size_t i = 0; i < image.size(); ++i) image[i] = static_cast<uint8_t>(i + 1);
  return image;
}

// The plain definition: out(y, x) = padded(y + p + dy, x' + p + dx) with x' mirrored when flipped.
std::vector<uint8_t> reference(const std::vector<uint8_t>& image, int64_t dy, int64_t dx, bool flip) {
  std::vector<uint8_t> out(image.size(), 0);
  for (int64_t y = 0; y < kShape.height; ++y) {
    for (int64_t x = 0; x < kShape.width; ++x) {
      const int64_t sy = y + dy, sx = (flip ? kShape.width - 1 - x : x) + dx;
      if (sy < 0 || sy >= kShape.height || sx < 0 || sx >= kShape.width) continue;
      for (int64_t c = 0; c < kShape.channels; ++c) {
        out[static_cast<size_t>((y * kShape.width + x) * kShape.channels + c)] =
            image[static_cast<size_t>((sy * kShape.width + sx) * kShape.channels + c)];
      }
    }
  }
  return out;
}

TEST_CASE("ImageAugmentation.crops_and_flips_draw_every_offset") {
  const std::vector<uint8_t> image = distinct_image();
  for (const ImageAugmentation augmentation : {ImageAugmentation{.crop_padding = 2, .horizontal_flip = true},
                                               ImageAugmentation{.crop_padding = 0, .horizontal_flip = true},
                                               ImageAugmentation{.crop_padding = 7, .horizontal_flip = false}}) {
    CAPTURE(augmentation.crop_padding);
    CAPTURE(augmentation.horizontal_flip);
    const int64_t p = augmentation.crop_padding;
    std::map<std::tuple<int64_t, int64_t, bool>, int> seen;
    for (int64_t example = 0; example < 3000; ++example) {
      std::vector<uint8_t> out(image.size());
      augment_image(image.data(), out.data(), kShape, augmentation, {.seed = 3, .epoch = 1, .example = example});
      // Exactly the reference of one offset and flip; a crop beyond the image is all padding.
      std::set<std::tuple<int64_t, int64_t, bool>> matches;
      for (int64_t dy = -p; dy <= p; ++dy) {
        for (int64_t dx = -p; dx <= p; ++dx) {
          for (bool flip : {false, true}) {
            if (flip && !augmentation.horizontal_flip) continue;
            if (reference(image, dy, dx, flip) == out) matches.insert({dy, dx, flip});
          }
        }
      }
      REQUIRE(!matches.empty());
      if (matches.size() == 1) ++seen[*matches.begin()];
    }
    // Every distinguishable outcome is drawn (those that leave pixels of the image are distinct).
    int64_t distinct = 0;
    for (int64_t dy = -p; dy <= p; ++dy) {
      for (int64_t dx = -p; dx <= p; ++dx) {
        if (std::abs(dy) < kShape.height && std::abs(dx) < kShape.width) distinct += augmentation.horizontal_flip ? 2 : 1;
      }
    }
    CHECK(static_cast<int64_t>(seen.size()) == distinct);
  }
  // Without padding or flip nothing changes.
  std::vector<uint8_t> out(image.size());
  augment_image(image.data(), out.data(), kShape, {}, {.seed = 3, .epoch = 0, .example = 5});
  CHECK(out == image);
}

// n examples of 5x6x2 bytes; example i's bytes are distinct from every other's.
LabelledImages labelled(int64_t n) {
  LabelledImages data{{{n, 5, 6, 2}, {}}, {{n}, {}}};
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < 60; ++j) data.images.values.push_back(static_cast<uint8_t>(1 + (7 * i + j) % 255));
    data.labels.values.push_back(static_cast<uint8_t>(i % 10));
  }
  return data;
}

Dataset images(int64_t n, BatchingOptions options, ImageAugmentation augmentation = {}) {
  auto dataset = labelled_images_dataset(labelled(n), "images", {5, 6, 2}, options, {.augmentation = augmentation});
  REQUIRE_MESSAGE(dataset.ok(), dataset.status().to_string());
  return std::move(*dataset);
}

std::vector<Batch> all_batches(const Dataset& dataset, int64_t epoch) {
  std::vector<Batch> batches;
  auto reader = dataset.epoch(epoch);
  for (;;) {
    auto batch = reader.next();
    REQUIRE(batch.ok());
    if (!*batch) return batches;
    batches.push_back(std::move(**batch));
  }
}

// Every batch of an epoch, joined (shards: each global batch's shards in order).
std::vector<float> epoch_features(int64_t n, int64_t batch_size, int64_t shards, int64_t epoch) {
  const ImageAugmentation augmentation{.crop_padding = 2, .horizontal_flip = true};
  std::vector<std::vector<Batch>> per_shard;
  for (int64_t shard = 0; shard < shards; ++shard) {
    const Dataset dataset = images(n, {.batch_size = batch_size, .seed = 11, .prefetch = shard % 2 == 0 ? 2 : 0,
                                       .threads = shard % 2 == 0 ? 1 : 2, .shard = shard, .shards = shards},
                                   augmentation);
    per_shard.push_back(all_batches(dataset, epoch));
  }
  std::vector<float> joined;
  for (size_t b = 0; b < per_shard[0].size(); ++b) {
    for (const std::vector<Batch>& batches : per_shard) {
      const std::vector<float> f = batches[b]["images"].to_vector<float>();
      joined.insert(joined.end(), f.begin(), f.end());
    }
  }
  return joined;
}

TEST_CASE("ImageAugmentation.float_images_move_as_u8_ones_do_padded_with_zeros") {
  const std::vector<uint8_t> image = distinct_image();
  const std::vector<float> floats(image.begin(), image.end());
  ImageShape float_shape = kShape;
  float_shape.value_bytes = sizeof(float);
  for (int64_t example = 0; example < 200; ++example) {
    CAPTURE(example);
    const AugmentationDraw draw{.seed = 3, .epoch = 2, .example = example};
    const ImageAugmentation augmentation{.crop_padding = 2, .horizontal_flip = true};
    std::vector<uint8_t> out(image.size());
    augment_image(image.data(), out.data(), kShape, augmentation, draw);
    std::vector<float> float_out(floats.size(), -1.0f);
    augment_image(reinterpret_cast<const uint8_t*>(floats.data()), reinterpret_cast<uint8_t*>(float_out.data()), float_shape,
                  augmentation, draw);
    CHECK(float_out == std::vector<float>(out.begin(), out.end()));
  }
}

TEST_CASE("ImageAugmentation.examples_do_not_depend_on_the_batching_or_the_shards") {
  const std::vector<float> whole = epoch_features(37, 37, 1, 2);
  CHECK(epoch_features(37, 8, 1, 2) == whole);
  CHECK(epoch_features(37, 5, 3, 2) == whole);
  CHECK(epoch_features(37, 16, 4, 2) == whole);
  CHECK(epoch_features(37, 37, 1, 3) != whole);  // another epoch, other crops
  // Not the unaugmented data.
  const Dataset plain = images(37, {.batch_size = 37, .seed = 11});
  CHECK(all_batches(plain, 2)[0]["images"].to_vector<float>() != whole);
}

TEST_CASE("ImageAugmentation.bad_settings_are_errors") {
  LabelledImages data{{{2, 6}, std::vector<uint8_t>(12, 1)}, {{2}, {0, 1}}};
  auto flat = labelled_images_dataset(data, "flat", {6}, {}, {.augmentation = {.horizontal_flip = true}});
  CHECK(flat.status().message() ==
        "flat, field 'image' feeding 'images': image augmentation needs a field shaped (height, width[, channels]), not "
        "image: u8[6]");
  data.images.dims = {2, 2, 3};
  auto negative = labelled_images_dataset(data, "negative", {2, 3}, {}, {.augmentation = {.crop_padding = -1}});
  CHECK(negative.status().message() == "negative, field 'image' feeding 'images': crop padding -1 is not in [0, 1048576]");
  CHECK(labelled_images_dataset(data, "padded", {2, 3}, {}, {.augmentation = {.crop_padding = 1}}).ok());
}

}  // namespace
}  // namespace mirra::runtime::data
