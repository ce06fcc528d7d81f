// load_fashion_mnist: file names, shapes and label range; the data set and the classifiers' feeds on
// top of it.
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

namespace {

graph::Expected<std::shared_ptr<const ExampleSource>> labelled_images_source(LabelledImages data, std::string name) {
  const int64_t size = data.size();
  MIRRA_ASSIGN_OR_RETURN(auto source, ArraySource::create(std::move(name), {idx_field("image", std::move(data.images)),
                                                                            idx_field("label", std::move(data.labels))},
                                                          size));
  return std::shared_ptr<const ExampleSource>(std::move(source));
}

std::string split_name(const std::string& directory, Split split) {
  return "Fashion-MNIST '" + directory + "' (" + (split == Split::train ? "train" : "test") + ")";
}

}  // namespace

graph::Expected<std::shared_ptr<const ExampleSource>> fashion_mnist_source(const std::string& directory, Split split) {
  MIRRA_ASSIGN_OR_RETURN(LabelledImages data, load_fashion_mnist(directory, split));
  return labelled_images_source(std::move(data), split_name(directory, split));
}

std::vector<Feed> classifier_feeds(std::vector<int64_t> image_shape, const ClassifierFeeds& feeds) {
  return {{.placeholder = feeds.images, .field = "image", .dtype = graph::DType::f32, .shape = std::move(image_shape),
           .scale = feeds.scale, .shift = feeds.shift, .augmentation = feeds.augmentation},
          {.placeholder = feeds.labels, .field = "label", .dtype = graph::DType::i64}};
}

graph::Expected<Dataset> labelled_images_dataset(LabelledImages data, std::string name, std::vector<int64_t> image_shape,
                                                 BatchingOptions options, const ClassifierFeeds& feeds) {
  if (data.images.dims.empty() || data.labels.dims.size() != 1 || data.images.dims[0] != data.labels.dims[0]) {
    return graph::invalid_argument(name + ": the images and the labels disagree on the number of examples");
  }
  int64_t per_image = 1;
  for (size_t d = 1; d < data.images.dims.size(); ++d) per_image *= data.images.dims[d];
  if (static_cast<int64_t>(data.images.values.size()) != data.size() * per_image ||
      static_cast<int64_t>(data.labels.values.size()) != data.size()) {
    return graph::invalid_argument(name + ": the images' or the labels' values do not fill their dims");
  }
  MIRRA_ASSIGN_OR_RETURN(auto source, labelled_images_source(std::move(data), std::move(name)));
  return Dataset::create(std::move(source), classifier_feeds(std::move(image_shape), feeds), options);
}

graph::Expected<Dataset> fashion_mnist_dataset(const std::string& directory, Split split, BatchingOptions options,
                                               const ClassifierFeeds& feeds) {
  MIRRA_ASSIGN_OR_RETURN(LabelledImages data, load_fashion_mnist(directory, split));
  return labelled_images_dataset(std::move(data), split_name(directory, split), {28, 28, 1}, options, feeds);
}

}  // namespace mirra::runtime::data
