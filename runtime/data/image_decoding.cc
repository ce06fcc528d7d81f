// decode_image: libpng's reading API for PNG, TurboJPEG for JPEG.
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

// libpng's low-level reading, with the transformations TensorFlow's decode_png applies to reach the
// requested channels: alpha stripped or added (from tRNS, else opaque), 16 bits cut to 8, palettes and
// low bit depths expanded, colour to gray with ITU-R 601's weights (0.299, 0.587, 0.114) and gray to
// colour. (libpng's simplified API converts in linear light instead, which gives other pixels.)
struct PngReader {
  png_structp png = nullptr;
  png_infop info = nullptr;
  std::span<const std::byte> bytes;
  size_t at = 0;
  std::string error;
  ~PngReader() { png_destroy_read_struct(&png, info != nullptr ? &info : nullptr, nullptr); }
};

void read_png_bytes(png_structp png, png_bytep out, png_size_t count) {
  auto* reader = static_cast<PngReader*>(png_get_io_ptr(png));
  if (reader->bytes.size() - reader->at < count) png_error(png, "truncated");
  std::memcpy(out, reader->bytes.data() + reader->at, count);
  reader->at += count;
}

void on_png_error(png_structp png, png_const_charp message) {
  static_cast<PngReader*>(png_get_error_ptr(png))->error = message;
  png_longjmp(png, 1);
}

void on_png_warning(png_structp, png_const_charp) {}

// Reads into `out` (resized here); false after an error, which reader.error then holds. No object with
// a destructor lives in this frame: libpng's errors leave it by longjmp.
bool read_png(PngReader& reader, int64_t channels, DecodedImage& out) {
  if (setjmp(png_jmpbuf(reader.png))) return false;
  png_set_read_fn(reader.png, &reader, read_png_bytes);
  png_read_info(reader.png, reader.info);
  png_uint_32 width = 0, height = 0;
  int bit_depth = 0, color_type = 0;
  png_get_IHDR(reader.png, reader.info, &width, &height, &bit_depth, &color_type, nullptr, nullptr, nullptr);
  if (static_cast<int64_t>(width) * height > kMaxPixels) png_error(reader.png, "more pixels than mirra decodes");
  const bool has_alpha = (color_type & PNG_COLOR_MASK_ALPHA) != 0;
  const bool has_transparency = png_get_valid(reader.png, reader.info, PNG_INFO_tRNS) != 0;
  if (channels == 4) {
    if (!has_alpha && has_transparency) png_set_tRNS_to_alpha(reader.png);
    if (!has_alpha && !has_transparency) png_set_add_alpha(reader.png, (1u << bit_depth) - 1, PNG_FILLER_AFTER);
  } else if (has_alpha || has_transparency) {
    png_set_strip_alpha(reader.png);
  }
  if (bit_depth > 8) png_set_strip_16(reader.png);
  png_set_packing(reader.png);
  const int passes = png_set_interlace_handling(reader.png);
  if (color_type == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(reader.png);
  const bool gray = (color_type & PNG_COLOR_MASK_COLOR) == 0;
  if (gray && bit_depth < 8) png_set_expand_gray_1_2_4_to_8(reader.png);
  if (channels == 1 && !gray) png_set_rgb_to_gray(reader.png, 1, 0.299, 0.587);
  if (channels != 1 && gray) png_set_gray_to_rgb(reader.png);
  png_read_update_info(reader.png, reader.info);
  out.height = height;
  out.width = width;
  out.channels = channels;
  out.pixels.resize(static_cast<size_t>(width) * height * static_cast<size_t>(channels));
  const size_t row_bytes = static_cast<size_t>(width) * static_cast<size_t>(channels);
  if (png_get_rowbytes(reader.png, reader.info) != row_bytes) png_error(reader.png, "an unexpected row layout");
  for (int pass = 0; pass < passes; ++pass) {
    for (png_uint_32 y = 0; y < height; ++y) png_read_row(reader.png, out.pixels.data() + y * row_bytes, nullptr);
  }
  png_read_end(reader.png, nullptr);
  return true;
}

graph::Expected<DecodedImage> decode_png(std::span<const std::byte> bytes, int64_t channels) {
  PngReader reader;
  reader.bytes = bytes;
  reader.png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &reader, on_png_error, on_png_warning);
  if (reader.png != nullptr) reader.info = png_create_info_struct(reader.png);
  if (reader.png == nullptr || reader.info == nullptr) return graph::internal_error("libpng could not start");
  DecodedImage out;
  if (!read_png(reader, channels, out)) return graph::invalid_argument("a damaged PNG image (" + reader.error + ")");
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
