// decode_image: libpng's simplified reading API for PNG, TurboJPEG for JPEG.
#include "runtime/data/image_decoding.h"

#include <png.h>
#include <turbojpeg.h>

#include <cstring>
#include <memory>
#include <string>

namespace mirra::runtime::data {

namespace {

constexpr uint8_t kPngMagic[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
constexpr uint8_t kJpegMagic[] = {0xff, 0xd8, 0xff};
// Larger images are refused: 2^28 pixels (16384 x 16384) is past any data set's, and a hostile header
// could otherwise claim one that allocates gigabytes.
constexpr int64_t kMaxPixels = int64_t{1} << 28;

bool starts_with(std::span<const std::byte> bytes, std::span<const uint8_t> magic) {
  return bytes.size() >= magic.size() && std::memcmp(bytes.data(), magic.data(), magic.size()) == 0;
}

graph::Expected<DecodedImage> decode_png(std::span<const std::byte> bytes, int64_t channels) {
  png_image image{};
  image.version = PNG_IMAGE_VERSION;
  if (png_image_begin_read_from_memory(&image, bytes.data(), bytes.size()) == 0) {
    return graph::invalid_argument(std::string("a damaged PNG image (") + image.message + ")");
  }
  image.format = channels == 1 ? PNG_FORMAT_GRAY : channels == 3 ? PNG_FORMAT_RGB : PNG_FORMAT_RGBA;
  const int64_t pixels = static_cast<int64_t>(image.width) * image.height;
  if (pixels > kMaxPixels) {
    png_image_free(&image);
    return graph::invalid_argument("a PNG image of " + std::to_string(image.width) + "x" + std::to_string(image.height) +
                                   " pixels, more than mirra decodes");
  }
  DecodedImage out{.height = image.height, .width = image.width, .channels = channels};
  out.pixels.resize(PNG_IMAGE_SIZE(image));
  if (png_image_finish_read(&image, nullptr, out.pixels.data(), 0, nullptr) == 0) {
    const std::string message = image.message;
    png_image_free(&image);
    return graph::invalid_argument("a damaged PNG image (" + message + ")");
  }
  return out;
}

graph::Expected<DecodedImage> decode_jpeg(std::span<const std::byte> bytes, int64_t channels) {
  const std::unique_ptr<void, int (*)(tjhandle)> decoder(tjInitDecompress(), tjDestroy);
  if (decoder == nullptr) return graph::internal_error("TurboJPEG could not start");
  const auto* data = reinterpret_cast<const unsigned char*>(bytes.data());
  int width = 0, height = 0, subsampling = 0, colorspace = 0;
  if (tjDecompressHeader3(decoder.get(), data, bytes.size(), &width, &height, &subsampling, &colorspace) != 0) {
    return graph::invalid_argument(std::string("a damaged JPEG image (") + tjGetErrorStr2(decoder.get()) + ")");
  }
  if (static_cast<int64_t>(width) * height > kMaxPixels) {
    return graph::invalid_argument("a JPEG image of " + std::to_string(width) + "x" + std::to_string(height) +
                                   " pixels, more than mirra decodes");
  }
  const int format = channels == 1 ? TJPF_GRAY : channels == 3 ? TJPF_RGB : TJPF_RGBA;
  DecodedImage out{.height = height, .width = width, .channels = channels};
  out.pixels.resize(static_cast<size_t>(width) * static_cast<size_t>(height) * static_cast<size_t>(channels));
  if (tjDecompress2(decoder.get(), data, bytes.size(), out.pixels.data(), width, 0, height, format, TJFLAG_FASTDCT) != 0 &&
      tjGetErrorCode(decoder.get()) == TJERR_FATAL) {
    return graph::invalid_argument(std::string("a damaged JPEG image (") + tjGetErrorStr2(decoder.get()) + ")");
  }
  return out;
}

}  // namespace

graph::Expected<DecodedImage> decode_image(std::span<const std::byte> bytes, int64_t channels) {
  if (channels != 1 && channels != 3 && channels != 4) {
    return graph::invalid_argument("images decode to 1, 3 or 4 channels, not " + std::to_string(channels));
  }
  if (starts_with(bytes, kPngMagic)) return decode_png(bytes, channels);
  if (starts_with(bytes, kJpegMagic)) return decode_jpeg(bytes, channels);
  return graph::invalid_argument("neither a PNG nor a JPEG image");
}

}  // namespace mirra::runtime::data
