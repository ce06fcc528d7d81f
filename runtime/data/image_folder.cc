// ImageFolder: the classes and files listed in Keras's order, each image read, decoded and resized
// when it is read.
#include "runtime/data/image_folder.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>

#include "runtime/data/image_decoding.h"
#include "runtime/data/image_resize.h"

namespace mirra::runtime::data {

namespace {

namespace fs = std::filesystem;

std::string lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text;
}

class Images final : public ExampleSource {
 public:
  Images(std::string name, std::vector<std::string> files, std::vector<int64_t> labels, const ImageFolderOptions& options)
      : name_(std::move(name)), files_(std::move(files)), labels_(std::move(labels)), options_(options) {
    fields_ = {{"image", ElementType::f32, {options.height, options.width, options.channels}}, {"label", ElementType::i64, {}}};
  }

  const std::string& name() const override { return name_; }
  const std::vector<Field>& fields() const override { return fields_; }
  int64_t size() const override { return static_cast<int64_t>(files_.size()); }

  graph::Status read(int64_t index, const Draw& /*draw*/, std::span<std::byte* const> out) const override {
    if (index < 0 || index >= size()) return graph::invalid_argument(name_ + ": example " + std::to_string(index) + " does not exist");
    const std::string& path = files_[static_cast<size_t>(index)];
    if (out.size() > 1 && out[1] != nullptr) std::memcpy(out[1], &labels_[static_cast<size_t>(index)], sizeof(int64_t));
    if (out.empty() || out[0] == nullptr) return graph::Status();
    std::ifstream in(path, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (!in.good() && !in.eof()) return graph::invalid_argument("cannot read image '" + path + "'");
    auto image = decode_image(std::as_bytes(std::span(bytes.data(), bytes.size())), options_.channels);
    if (!image.ok()) return graph::invalid_argument("image '" + path + "': " + image.status().message());
    resize_bilinear(image->pixels.data(), image->height, image->width, options_.channels, reinterpret_cast<float*>(out[0]),
                    options_.height, options_.width);
    return graph::Status();
  }

 private:
  std::string name_;
  std::vector<std::string> files_;
  std::vector<int64_t> labels_;
  ImageFolderOptions options_;
  std::vector<Field> fields_;
};

}  // namespace

graph::Expected<ImageFolder> image_folder_source(const std::string& root, const ImageFolderOptions& options) {
  const std::string name = "image folder '" + root + "'";
  if (options.height < 1 || options.width < 1 || options.height > (1 << 16) || options.width > (1 << 16)) {
    return graph::invalid_argument(name + ": the image size must be in [1, 65536] each way");
  }
  if (options.channels != 1 && options.channels != 3 && options.channels != 4) {
    return graph::invalid_argument(name + ": images have 1, 3 or 4 channels, not " + std::to_string(options.channels));
  }
  std::error_code error;
  if (!fs::is_directory(root, error)) return graph::invalid_argument(name + " is not a folder");
  ImageFolder folder;
  for (const fs::directory_entry& entry : fs::directory_iterator(root, error)) {
    if (entry.is_directory()) folder.class_names.push_back(entry.path().filename().string());
  }
  std::sort(folder.class_names.begin(), folder.class_names.end());
  if (folder.class_names.empty()) return graph::invalid_argument(name + " has no class folders (root/<class>/<image>)");
  std::vector<std::string> files;
  std::vector<int64_t> labels;
  for (size_t c = 0; c < folder.class_names.size(); ++c) {
    // Keras's order: the folders below the class's by path, each folder's files by name.
    std::map<std::string, std::vector<std::string>> by_folder;
    const fs::path class_dir = fs::path(root) / folder.class_names[c];
    for (const fs::directory_entry& entry : fs::recursive_directory_iterator(class_dir, error)) {
      if (!entry.is_regular_file()) continue;
      const std::string file = entry.path().filename().string();
      const std::string extension = lower(entry.path().extension().string());
      if (extension == ".bmp" || extension == ".gif") {
        return graph::invalid_argument(name + ": '" + entry.path().string() + "' is a " + extension.substr(1) +
                                       " image; PNG and JPEG images are read");
      }
      if (extension == ".png" || extension == ".jpg" || extension == ".jpeg") by_folder[entry.path().parent_path().string()].push_back(file);
    }
    if (error) return graph::invalid_argument(name + ": cannot list '" + class_dir.string() + "': " + error.message());
    size_t found = 0;
    for (auto& [dir, names] : by_folder) {
      std::sort(names.begin(), names.end());
      for (const std::string& file : names) {
        files.push_back((fs::path(dir) / file).string());
        labels.push_back(static_cast<int64_t>(c));
      }
      found += names.size();
    }
    if (found == 0) return graph::invalid_argument(name + ": class '" + folder.class_names[c] + "' holds no PNG or JPEG images");
  }
  folder.source = std::make_shared<Images>(name, std::move(files), std::move(labels), options);
  return folder;
}

}  // namespace mirra::runtime::data
