// Fashion-MNIST (as Debian's dataset-fashion-mnist installs it): the train or test split as images
// [N, 28, 28] and labels [N] in [0, 10), checked against each other; as a data set of the fields
// "image" (u8[28,28]) and "label" (u8[]); or as a Dataset feeding "images" f32[28,28,1] scaled to
// [0, 1] and "labels" i64, which the example classifiers take. Any labelled u8 images in memory make
// such a Dataset too (labelled_images_dataset).
#pragma once

#include <memory>
#include <string>

#include "runtime/data/dataset.h"
#include "runtime/data/idx_file.h"

namespace mirra::runtime::data {

inline constexpr const char* kFashionMnistDir = "/usr/share/datasets/fashion-mnist";

enum class Split { train, test };

struct LabelledImages {
  IdxArray images;  // [N, ...]: u8 values
  IdxArray labels;  // [N]
  int64_t size() const { return labels.dims.empty() ? 0 : labels.dims[0]; }
};

graph::Expected<LabelledImages> load_fashion_mnist(const std::string& directory, Split split);
// The split as the fields "image" and "label".
graph::Expected<std::shared_ptr<const ExampleSource>> fashion_mnist_source(const std::string& directory, Split split);
// What a classifier's placeholders take of labelled images: `images` f32 = image * scale + shift (by
// default / 255; augmented first), shaped as the Dataset is told, and `labels` i64 = label.
struct ClassifierFeeds {
  std::string images = "images", labels = "labels";
  std::vector<double> scale = {1.0 / 255.0}, shift;
  ImageAugmentation augmentation;
};
std::vector<Feed> classifier_feeds(std::vector<int64_t> image_shape, const ClassifierFeeds& feeds = {});
// `data` as the fields "image" (u8, shaped as the images' dims after the first) and "label", fed to a
// classifier's placeholders, the images as `image_shape` (the same number of values).
graph::Expected<Dataset> labelled_images_dataset(LabelledImages data, std::string name, std::vector<int64_t> image_shape,
                                                 BatchingOptions options, const ClassifierFeeds& feeds = {});
graph::Expected<Dataset> fashion_mnist_dataset(const std::string& directory, Split split, BatchingOptions options,
                                               const ClassifierFeeds& feeds = {});

}  // namespace mirra::runtime::data
