// load_fashion_mnist: file names, shapes and label range; fashion_mnist_dataset on top of it.
#include "runtime/data/fashion_mnist.h"

namespace mirra::runtime::data {

graph::Expected<LabelledImages> load_fashion_mnist(const std::string& directory, Split split) {
  const std::string prefix = directory + (split == Split::train ? "/train" : "/t10k");
  LabelledImages set;
  MIRRA_ASSIGN_OR_RETURN(set.images, read_idx_file(prefix + "-images-idx3-ubyte.gz"));
  MIRRA_ASSIGN_OR_RETURN(set.labels, read_idx_file(prefix + "-labels-idx1-ubyte.gz"));
  if (set.images.dims.size() != 3 || set.images.dims[1] != 28 || set.images.dims[2] != 28) {
    return graph::invalid_argument("Fashion-MNIST images in '" + directory + "' are not [N, 28, 28]");
  }
  if (set.labels.dims.size() != 1 || set.labels.dims[0] != set.images.dims[0]) {
    return graph::invalid_argument("Fashion-MNIST in '" + directory + "': " + std::to_string(set.images.dims[0]) +
                                   " images but a label file of another shape");
  }
  for (size_t i = 0; i < set.labels.values.size(); ++i) {
    if (set.labels.values[i] > 9) {
      return graph::invalid_argument("Fashion-MNIST in '" + directory + "': label " +
                                     std::to_string(set.labels.values[i]) + " of example " + std::to_string(i) +
                                     " is outside [0, 10)");
    }
  }
  return set;
}

graph::Expected<Dataset> fashion_mnist_dataset(const std::string& directory, Split split, BatchingOptions options) {
  MIRRA_ASSIGN_OR_RETURN(const LabelledImages data, load_fashion_mnist(directory, split));
  return Dataset::create(data.images, data.labels, {28, 28, 1}, options);
}

}  // namespace mirra::runtime::data
