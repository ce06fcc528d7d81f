// A folder of images by class against Keras 3 and TensorFlow 2.21
// (tests/runtime/image_folder_reference/generate.py): the classes, the order of the files and every
// resized pixel as image_dataset_from_directory gives them, in RGB and in grayscale; and the folders
// mirra cannot read refused naming why.
#include <doctest/doctest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "runtime/data/image_folder.h"
#include "runtime/data/numpy_file.h"
#include "tests/golden_file.h"

namespace mirra::runtime::data {
namespace {

std::string reference(const std::string& name) { return test::source_file("tests/runtime/image_folder_reference/" + name); }

void check_against_keras(int64_t channels, const std::string& expected_name) {
  CAPTURE(channels);
  auto folder = image_folder_source(reference("images"), {.height = 6, .width = 4, .channels = channels});
  REQUIRE_MESSAGE(folder.ok(), folder.status().to_string());
  CHECK(folder->class_names == std::vector<std::string>{"cats", "dogs", "zebras"});
  auto expected = read_npz(reference("expected.npz"));
  REQUIRE(expected.ok());
  const NumpyArray* images = nullptr;
  const NumpyArray* labels = nullptr;
  for (const auto& [name, array] : *expected) {
    if (name == expected_name) images = &array;
    if (name == "labels") labels = &array;
  }
  REQUIRE(images != nullptr);
  REQUIRE(labels != nullptr);
  const ExampleSource& source = *folder->source;
  REQUIRE(source.size() == 5);
  CHECK(source.fields()[0].to_string() == "image: f32[6,4," + std::to_string(channels) + "]");
  const int64_t values = 6 * 4 * channels;
  for (int64_t k = 0; k < 5; ++k) {
    CAPTURE(k);
    std::vector<float> image(static_cast<size_t>(values));
    int64_t label = -1;
    std::byte* out[] = {reinterpret_cast<std::byte*>(image.data()), reinterpret_cast<std::byte*>(&label)};
    REQUIRE(source.read(k, {}, out).ok());
    // The npz members lie behind their zip headers, unaligned: copied out.
    int64_t want_label = 0;
    std::memcpy(&want_label, labels->data + k * sizeof(int64_t), sizeof(int64_t));
    CHECK(label == want_label);
    std::vector<float> want(static_cast<size_t>(values));
    std::memcpy(want.data(), images->data + k * values * sizeof(float), want.size() * sizeof(float));
    float worst = 0;
    for (size_t i = 0; i < want.size(); ++i) worst = std::max(worst, std::abs(image[i] - want[i]));
    CHECK(worst == 0.0f);
  }
}

TEST_CASE("ImageFolder.reads_as_keras_image_dataset_from_directory_does") {
  check_against_keras(3, "rgb");
  check_against_keras(1, "gray");
}

TEST_CASE("ImageFolder.folders_it_cannot_read_are_refused") {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("mirra_image_folder_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir / "empty_class");
  CHECK(image_folder_source((dir / "missing").string(), {}).status().message() == "image folder '" + (dir / "missing").string() + "' is not a folder");
  CHECK(image_folder_source(dir.string(), {}).status().message() ==
        "image folder '" + dir.string() + "': class 'empty_class' holds no PNG or JPEG images");
  std::ofstream(dir / "empty_class" / "x.gif") << "GIF89a";
  CHECK(image_folder_source(dir.string(), {}).status().message().ends_with("x.gif' is a gif image; PNG and JPEG images are read"));
  std::filesystem::remove(dir / "empty_class" / "x.gif");
  std::ofstream(dir / "empty_class" / "x.png") << "not a png";
  auto damaged = image_folder_source(dir.string(), {.height = 2, .width = 2});
  REQUIRE(damaged.ok());
  std::vector<float> image(12);
  std::byte* out[] = {reinterpret_cast<std::byte*>(image.data()), nullptr};
  CHECK(damaged->source->read(0, {}, out).message() == "image '" + (dir / "empty_class" / "x.png").string() + "': neither a PNG nor a JPEG image");
  CHECK(image_folder_source(dir.string(), {.channels = 2}).status().message() ==
        "image folder '" + dir.string() + "': images have 1, 3 or 4 channels, not 2");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace mirra::runtime::data
