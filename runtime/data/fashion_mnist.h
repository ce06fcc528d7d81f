// Fashion-MNIST (as Debian's dataset-fashion-mnist installs it): the train or test split as images
// [N, 28, 28] and labels [N] in [0, 10), checked against each other, or as a Dataset of images
// [28, 28, 1] scaled to [0, 1].
#pragma once

#include <string>

#include "runtime/data/dataset.h"
#include "runtime/data/idx_file.h"

namespace mirra::runtime::data {

inline constexpr const char* kFashionMnistDir = "/usr/share/datasets/fashion-mnist";

enum class Split { train, test };

struct LabelledImages {
  IdxArray images;  // [N, 28, 28]
  IdxArray labels;  // [N]
  int64_t size() const { return labels.dims.empty() ? 0 : labels.dims[0]; }
};

graph::Expected<LabelledImages> load_fashion_mnist(const std::string& directory, Split split);
graph::Expected<Dataset> fashion_mnist_dataset(const std::string& directory, Split split, BatchingOptions options);

}  // namespace mirra::runtime::data
