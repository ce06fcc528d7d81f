// A folder of images by class, as Keras's image_dataset_from_directory reads one: root/<class>/...,
// the classes the sorted names of root's subfolders (label i the i-th), the images every .png, .jpg
// and .jpeg file below a class's folder (in Keras's order: by folder path, then file name), decoded
// (runtime/data/image_decoding.h) into `channels` and resized to height x width as tf.image.resize does
// (runtime/data/image_resize.h). Fields: "image" f32[height, width, channels] (0 to 255, unscaled, as
// Keras gives them) and "label" i64[]. The files are listed when the data set opens and each image is
// read and decoded when a batch needs it, on the input pipeline's threads. A file that is not an image
// of those formats (a .bmp or .gif, which Keras would read), a damaged image, a class without images
// are errors naming the file or folder.
//
//   auto source = image_folder_source("flowers", {.height = 180, .width = 180, .channels = 3});
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "graph/status.h"
#include "runtime/data/example_source.h"

namespace mirra::runtime::data {

struct ImageFolderOptions {
  int64_t height = 256, width = 256;  // Keras's default image_size
  int64_t channels = 3;               // 1 (grayscale), 3 (rgb) or 4 (rgba)
};

struct ImageFolder {
  std::shared_ptr<const ExampleSource> source;
  std::vector<std::string> class_names;  // label i is class_names[i]
};

graph::Expected<ImageFolder> image_folder_source(const std::string& root, const ImageFolderOptions& options);

}  // namespace mirra::runtime::data
