// IDX reading: a round trip of plain and gzipped files, every truncation, the classic malformed
// headers, and the real Fashion-MNIST files from Debian's package.
#include <doctest/doctest.h>

#include <zlib.h>

#include <cstdio>
#include <filesystem>

#include "runtime/data/fashion_mnist.h"

namespace mirra::runtime::data {
namespace {

std::vector<uint8_t> idx_bytes(const std::vector<uint32_t>& dims, uint8_t type = 0x08) {
  std::vector<uint8_t> bytes = {0, 0, type, static_cast<uint8_t>(dims.size())};
  uint64_t count = 1;
  for (uint32_t d : dims) {
    for (int shift = 24; shift >= 0; shift -= 8) bytes.push_back(static_cast<uint8_t>(d >> shift));
    count *= d;
  }
  for (uint64_t i = 0; i < count && i < 4096; ++i) bytes.push_back(static_cast<uint8_t>(i * 7));
  return bytes;
}

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("mirra_idx_test_" + name)).string();
}

TEST_CASE("IdxFile.round_trips_plain_and_gzipped") {
  const auto bytes = idx_bytes({3, 4, 5});
  auto parsed = parse_idx(bytes, "memory");
  REQUIRE(parsed.ok());
  CHECK(parsed->dims == std::vector<int64_t>{3, 4, 5});
  REQUIRE(parsed->values.size() == 60);
  CHECK(parsed->values[59] == static_cast<uint8_t>(59 * 7));

  const std::string plain = temp_path("plain.idx"), zipped = temp_path("zipped.idx.gz");
  {
    FILE* f = std::fopen(plain.c_str(), "wb");
    REQUIRE(f != nullptr);
    std::fwrite(bytes.data(), 1, bytes.size(), f);
    std::fclose(f);
    gzFile gz = gzopen(zipped.c_str(), "wb");
    REQUIRE(gz != nullptr);
    gzwrite(gz, bytes.data(), static_cast<unsigned>(bytes.size()));
    gzclose(gz);
  }
  for (const std::string& path : {plain, zipped}) {
    auto read = read_idx_file(path);
    REQUIRE_MESSAGE(read.ok(), read.status().to_string());
    CHECK(read->values == parsed->values);
    std::filesystem::remove(path);
  }
  CHECK(read_idx_file(temp_path("missing")).status().code() == graph::StatusCode::not_found);
}

TEST_CASE("IdxFile.rejects_every_truncation_and_malformed_header") {
  const auto bytes = idx_bytes({2, 3});
  for (size_t length = 0; length < bytes.size(); ++length) {
    CAPTURE(length);
    CHECK_FALSE(parse_idx(std::span(bytes.data(), length), "cut").ok());
  }
  auto longer = bytes;
  longer.push_back(1);
  CHECK(parse_idx(longer, "long").status().message() == "IDX file 'long': 1 unexpected bytes after the data");
  auto magic = bytes;
  magic[0] = 1;
  CHECK(parse_idx(magic, "m").status().message() == "IDX file 'm': bad magic number (first two bytes must be 0)");
  CHECK(parse_idx(idx_bytes({2}, 0x0D), "f").status().message() ==
        "IDX file 'f': element type 0x13 is not supported (only unsigned bytes, 0x08)");
  CHECK(parse_idx(idx_bytes({}), "r").status().message() == "IDX file 'r': rank 0 is outside [1, 4]");
  // Dims whose product overflows, or asks for more than the size limit, fail before any allocation.
  CHECK(parse_idx(idx_bytes({0x7FFFFFFF, 0x7FFFFFFF, 0x7FFFFFFF}), "huge").status().message().find("more than") !=
        std::string::npos);
  auto too_big_dim = idx_bytes({1});
  too_big_dim[4] = 0xFF;
  CHECK(parse_idx(too_big_dim, "d").status().message() == "IDX file 'd': dim 0 is too large");
  auto truncated = parse_idx(idx_bytes({100}), "t");  // header says 100 bytes; the helper wrote 100
  CHECK(truncated.ok());
  auto short_data = idx_bytes({100});
  short_data.resize(short_data.size() - 10);
  CHECK(parse_idx(short_data, "t").status().message() ==
        "IDX file 't': truncated: its header promises 100 bytes of data, the file has 90");
}

TEST_CASE("IdxFile.corrupt_gzip_is_an_error") {
  const std::string path = temp_path("corrupt.gz");
  const auto bytes = idx_bytes({50, 50});
  {
    gzFile gz = gzopen(path.c_str(), "wb");
    gzwrite(gz, bytes.data(), static_cast<unsigned>(bytes.size()));
    gzclose(gz);
    // Flip bytes in the middle of the compressed stream.
    FILE* f = std::fopen(path.c_str(), "r+b");
    std::fseek(f, 20, SEEK_SET);
    const uint8_t junk[8] = {0xFF, 0x00, 0xFF, 0x00, 0xFF, 0x00, 0xFF, 0x00};
    std::fwrite(junk, 1, sizeof(junk), f);
    std::fclose(f);
  }
  CHECK_FALSE(read_idx_file(path).ok());
  std::filesystem::remove(path);
}

TEST_CASE("FashionMnist.test_split_loads_from_the_debian_package") {
  auto test = load_fashion_mnist(kFashionMnistDir, Split::test);
  REQUIRE_MESSAGE(test.ok(), test.status().to_string());
  CHECK(test->size() == 10000);
  CHECK(test->images.dims == std::vector<int64_t>{10000, 28, 28});
  std::vector<int> per_class(10, 0);
  for (uint8_t label : test->labels.values) ++per_class[label];
  for (int count : per_class) CHECK(count == 1000);
  CHECK(load_fashion_mnist("/nonexistent", Split::train).status().code() == graph::StatusCode::not_found);
}

}  // namespace
}  // namespace mirra::runtime::data
