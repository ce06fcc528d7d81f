// TFRecord files written by TensorFlow 2.21 (tests/runtime/tfrecord_reference/generate.py): every
// feature kind read exactly (floats, 64-bit integers, raw bytes, PNG images, and JPEG images pixel
// for pixel as tf.io.decode_jpeg decodes them), from a plain file, a GZIP one and two shards; damaged
// records refused naming the file, the record and its byte offset, or skipped and counted; CRC-32C
// against its published check value.
#include <doctest/doctest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>

#include "runtime/data/numpy_file.h"
#include "runtime/data/stream_source.h"
#include "runtime/data/tfrecord_file.h"
#include "tests/golden_file.h"

namespace mirra::runtime::data {
namespace {

std::string reference(const std::string& name) { return test::source_file("tests/runtime/tfrecord_reference/" + name); }

const TfRecordOptions kEveryKind{.features = {{"f", {.type = "float", .shape = {3}}},
                                              {"i", {.type = "int64", .shape = {2}}},
                                              {"raw", {.type = "bytes", .shape = {4}}},
                                              {"png", {.type = "bytes", .shape = {5, 4, 3}, .decode = "image"}},
                                              {"gray", {.type = "bytes", .shape = {5, 4, 1}, .decode = "image"}},
                                              {"jpeg", {.type = "bytes", .shape = {8, 6, 1}, .decode = "image"}}}};

// Example k's value of field f, read at random or, from a stream, in order.
std::vector<std::byte> value_of(const ExampleSource& source, size_t f, int64_t k) {
  std::vector<std::byte> value(source.fields()[f].bytes());
  std::vector<std::byte*> out(source.fields().size(), nullptr);
  out[f] = value.data();
  if (const StreamSource* stream = source.stream()) {
    std::vector<int64_t> files(static_cast<size_t>(stream->file_count()));
    for (size_t i = 0; i < files.size(); ++i) files[i] = static_cast<int64_t>(i);
    auto pass = stream->open(files);
    REQUIRE(pass.ok());
    StreamRecord record;
    for (int64_t i = 0; i <= k; ++i) REQUIRE(*(*pass)->next(record));
    REQUIRE(stream->decode(record, out).ok());
  } else {
    REQUIRE(source.read(k, {}, out).ok());
  }
  return value;
}

// Every example's values of every field, checked against expected.npz.
void check_every_kind(const ExampleSource& source) {
  auto expected = read_npz(reference("expected.npz"));
  REQUIRE_MESSAGE(expected.ok(), expected.status().to_string());
  REQUIRE(source.size() == 6);
  for (const auto& member : *expected) {
    const std::string& name = member.first;
    const NumpyArray& array = member.second;
    CAPTURE(name);
    const size_t f = source.field_index(name).value();
    const size_t bytes = source.fields()[f].bytes();
    CHECK(bytes * 6 == static_cast<size_t>(array.elements()) * element_size(array.type));
    for (int64_t k = 0; k < 6; ++k) {
      CAPTURE(k);
      CHECK(std::memcmp(value_of(source, f, k).data(), array.data + static_cast<size_t>(k) * bytes, bytes) == 0);
    }
  }
}

TEST_CASE("TfRecord.every_feature_kind_reads_as_tensorflow_wrote_it") {
  std::ifstream producer(reference("producer.txt"));
  std::string line;
  std::getline(producer, line);
  CHECK(line.starts_with("TensorFlow 2.21"));
  auto plain = tfrecord_source({reference("every_kind.tfrecord")}, kEveryKind);
  REQUIRE_MESSAGE(plain.ok(), plain.status().to_string());
  CHECK(plain->skipped == 0);
  const auto field = [&](const char* name) { return plain->source->fields()[plain->source->field_index(name).value()].to_string(); };
  CHECK(field("f") == "f: f32[3]");
  CHECK(field("i") == "i: i64[2]");
  CHECK(field("png") == "png: u8[5,4,3]");
  check_every_kind(*plain->source);
  auto gzip = tfrecord_source({reference("every_kind.tfrecord.gz")}, {.features = kEveryKind.features, .gzip = true});
  REQUIRE_MESSAGE(gzip.ok(), gzip.status().to_string());
  CHECK(gzip->source->stream() != nullptr);
  check_every_kind(*gzip->source);
  auto shards = tfrecord_source({reference("shard-00000-of-00002"), reference("shard-00001-of-00002")}, kEveryKind);
  REQUIRE_MESSAGE(shards.ok(), shards.status().to_string());
  check_every_kind(*shards->source);
}

TEST_CASE("TfRecord.crc32c_is_castagnolis") {
  const std::string check = "123456789";
  CHECK(crc32c(std::as_bytes(std::span(check.data(), check.size()))) == 0xe3069283u);
}

struct Scratch {
  std::filesystem::path dir = std::filesystem::temp_directory_path() / ("mirra_tfrecord_test_" + std::to_string(::getpid()));
  Scratch() { std::filesystem::create_directories(dir); }
  ~Scratch() {
    std::error_code ignored;
    std::filesystem::remove_all(dir, ignored);
  }
  // every_kind.tfrecord with `edit` applied, as `name`.
  std::string damaged(const std::string& name, const std::function<void(std::string&)>& edit) const {
    std::ifstream in(reference("every_kind.tfrecord"), std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    edit(bytes);
    const std::string path = (dir / name).string();
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
  }
};

graph::Status read_all(const ExampleSource& source) {
  for (int64_t k = 0; k < source.size(); ++k) {
    std::vector<std::vector<std::byte>> values;
    std::vector<std::byte*> out;
    for (const Field& field : source.fields()) values.emplace_back(field.bytes());
    for (auto& v : values) out.push_back(v.data());
    MIRRA_RETURN_IF_ERROR(source.read(k, {}, out));
  }
  return graph::Status();
}

TEST_CASE("TfRecord.damaged_files_are_refused_or_their_corrupt_records_skipped") {
  const Scratch scratch;
  // The first record's length is at byte 0; its data from byte 12.
  const std::string flipped = scratch.damaged("flipped", [](std::string& b) { b[40] ^= 0x01; });
  auto lazy = tfrecord_source({flipped}, kEveryKind);
  REQUIRE(lazy.ok());
  CHECK(read_all(*lazy->source).message() == "TFRecord file '" + flipped + "', record 0 at byte 0: corrupt (its data's CRC-32C does not match)");
  auto skipping = tfrecord_source({flipped}, {.features = kEveryKind.features, .skip_corrupt = true});
  REQUIRE(skipping.ok());
  CHECK(skipping->skipped == 1);
  CHECK(skipping->source->size() == 5);
  CHECK(read_all(*skipping->source).ok());
  const std::string length = scratch.damaged("length", [](std::string& b) { b[3] ^= 0x10; });
  CHECK(tfrecord_source({length}, kEveryKind).status().message() ==
        "TFRecord file '" + length + "', record 0 at byte 0: corrupt (its length's CRC-32C does not match)");
  const std::string cut = scratch.damaged("cut", [](std::string& b) { b.resize(b.size() - 3); });
  const std::string truncated = tfrecord_source({cut}, kEveryKind).status().message();
  CHECK(truncated.starts_with("TFRecord file '" + cut + "', record 5 at byte "));
  CHECK(truncated.find(": truncated (it claims ") != std::string::npos);
  const std::string headless = scratch.damaged("headless", [](std::string& b) { b += std::string(5, '\0'); });
  CHECK(tfrecord_source({headless}, kEveryKind).status().message().ends_with("record 6 at byte 4401: truncated in its header"));
  CHECK(tfrecord_source({reference("every_kind.tfrecord.gz")}, kEveryKind).status().message() ==
        "TFRecord file '" + reference("every_kind.tfrecord.gz") + "', record 0 at byte 0: corrupt (its length's CRC-32C does not match)");
  CHECK(tfrecord_source({reference("every_kind.tfrecord")}, {.features = kEveryKind.features, .gzip = true}).status().message().starts_with(
      "TFRecord file '" + reference("every_kind.tfrecord") + "': not a GZIP file, or a damaged one"));
}

TEST_CASE("TfRecord.features_that_do_not_match_the_spec_are_errors_naming_them") {
  const auto first_error = [](const std::map<std::string, TfFeature>& features) {
    auto source = tfrecord_source({reference("every_kind.tfrecord")}, {.features = features});
    REQUIRE_MESSAGE(source.ok(), source.status().to_string());
    return read_all(*source->source).message();
  };
  const std::string record = "TFRecord file '" + reference("every_kind.tfrecord") + "', record 0 at byte 0";
  CHECK(first_error({{"label", {.type = "int64"}}}) == record + " has no feature 'label' (its features: f, gray, i, jpeg, png, raw)");
  CHECK(first_error({{"f", {.type = "int64", .shape = {3}}}}) == record + ", feature 'f': a float list, not int64");
  CHECK(first_error({{"f", {.type = "float", .shape = {4}}}}) == record + ", feature 'f': 3 values, where its shape f32[4] holds 4");
  CHECK(first_error({{"raw", {.type = "bytes", .shape = {2, 3}}}}) == record + ", feature 'raw': 4 values, where its shape u8[2,3] holds 6");
  CHECK(first_error({{"png", {.type = "bytes", .shape = {4, 5, 3}, .decode = "image"}}}) ==
        record + ", feature 'png': a 5x4 image, not 4x5");
  CHECK(first_error({{"raw", {.type = "bytes", .shape = {4, 1, 1}, .decode = "image"}}}) ==
        record + ", feature 'raw': neither a PNG nor a JPEG image");
  CHECK(tfrecord_source({reference("every_kind.tfrecord")}, {.features = {{"png", {.type = "bytes", .shape = {5, 4}, .decode = "image"}}}})
            .status().message() == "TFRecord feature 'png': an image is a bytes feature of shape [height, width, 1, 3 or 4 channels]");
  CHECK(tfrecord_source({reference("every_kind.tfrecord")}, {.features = {{"x", {.type = "string"}}}}).status().message() ==
        "TFRecord feature 'x': type 'string' is not int64, float or bytes");
}

}  // namespace
}  // namespace mirra::runtime::data
