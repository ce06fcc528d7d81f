// libFuzzer target: arbitrary bytes as a data file. The first byte picks the reader (modulo 5: 0, the
// rest as an .npy file; 1, written to a file and read as an .npz archive, through minizip; 2, as a CSV
// file, through libcsv; 3, as a TFRecord file of Examples with a feature of each kind, PNG and JPEG
// images among them; 4, the same as a GZIP-compressed TFRecord stream), and a data set that opens is
// read example by example; a file that reads must read every value it claims within its bytes, and one
// that does not must be an error, never a crash.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <span>
#include <string>
#include <vector>

#include "runtime/data/csv_file.h"
#include "runtime/data/numpy_file.h"
#include "runtime/data/stream_source.h"
#include "runtime/data/tfrecord_file.h"

namespace {

// Reads every byte of the array's values, so that one past its bytes trips the address sanitizer.
uint8_t touch(const mirra::runtime::data::NumpyArray& array) {
  uint8_t sum = 0;
  const size_t bytes = static_cast<size_t>(array.elements()) * mirra::runtime::data::element_size(array.type);
  for (size_t i = 0; i < bytes; ++i) sum = static_cast<uint8_t>(sum + static_cast<uint8_t>(array.data[i]));
  return sum;
}

// Reads every example of `source` into buffers of its fields' sizes; whether all reads went through.
bool read_every_example(const mirra::runtime::data::ExampleSource& source) {
  std::vector<std::vector<std::byte>> values;
  std::vector<std::byte*> targets;
  for (const auto& field : source.fields()) values.emplace_back(field.bytes());
  for (auto& v : values) targets.push_back(v.data());
  bool all = true;
  if (const auto* stream = source.stream()) {
    std::vector<int64_t> files(static_cast<size_t>(stream->file_count()));
    for (size_t f = 0; f < files.size(); ++f) files[f] = static_cast<int64_t>(f);
    auto pass = stream->open(files);
    if (!pass.ok()) return false;
    mirra::runtime::data::StreamRecord record;
    while (true) {
      auto more = (*pass)->next(record);
      if (!more.ok()) return false;
      if (!*more) return all;
      all = stream->decode(record, targets).ok() && all;
    }
  }
  for (int64_t i = 0; i < source.size(); ++i) all = source.read(i, {}, targets).ok() && all;
  return all;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace mirra::runtime::data;
  if (size == 0) return 0;
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data) + 1, size - 1);
  volatile uint8_t sink = 0;
  if (data[0] % 5 == 0) {
    auto array = parse_npy(bytes, nullptr, "fuzz input");
    if (array.ok()) sink = touch(*array);
    return 0;
  }
  if (data[0] % 5 == 2) {
    auto csv = csv_source_from_text(std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size()), "fuzz input");
    if (!csv.ok()) return 0;
    // Every CSV value was parsed when the data set opened: reading one cannot fail.
    if (!read_every_example(**csv)) std::abort();
    return 0;
  }
  static const std::string path = "/tmp/mirra_data_fuzzer_" + std::to_string(::getpid());
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(reinterpret_cast<const char*>(bytes.data()),
                                                                 static_cast<std::streamsize>(bytes.size()));
  if (data[0] % 5 == 3 || data[0] % 5 == 4) {
    // The features of the seed, TensorFlow's tests/runtime/tfrecord_reference/every_kind.tfrecord.
    TfRecordOptions options{.features = {{"f", {.type = "float", .shape = {3}}},
                                         {"i", {.type = "int64", .shape = {2}}},
                                         {"raw", {.type = "bytes", .shape = {4}}},
                                         {"png", {.type = "bytes", .shape = {5, 4, 3}, .decode = "image"}},
                                         {"jpeg", {.type = "bytes", .shape = {8, 6, 1}, .decode = "image"}}}};
    options.gzip = data[0] % 5 == 4;
    auto records = tfrecord_source({path}, options);
    if (records.ok()) (void)read_every_example(*records->source);  // a record may fail its CRC or its features
    return 0;
  }
  auto members = read_npz(path);
  if (members.ok()) {
    for (const auto& [name, array] : *members) sink = static_cast<uint8_t>(sink + touch(array));
  }
  (void)sink;
  return 0;
}
