// NumPy's files against NumPy itself: numpy (tests/runtime/numpy_files.py, Debian's python3-numpy)
// writes arrays of every dtype mirra reads as .npy, in a stored .npz and in a deflated one, with their
// raw bytes beside them, and mirra reads exactly those bytes; a data set of an .npz feeds its values;
// the arrays and files mirra refuses are refused naming the file, the array and the reason; what
// mirra writes (write_npy, write_npz) numpy reads back.
#include <doctest/doctest.h>

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>

#include "runtime/data/dataset.h"
#include "runtime/data/numpy_file.h"

namespace mirra::runtime::data {
namespace {

namespace fs = std::filesystem;

// The files numpy writes, once per test binary, in a folder removed when it exits.
struct NumpyDir {
  std::string path;
  NumpyDir() {
    path = (fs::temp_directory_path() / ("mirra_numpy_test_" + std::to_string(::getpid()))).string();
    fs::create_directories(path);
    const std::string command =
        std::string(MIRRA_SYSTEM_PYTHON) + " " + MIRRA_SOURCE_DIR + "/tests/runtime/numpy_files.py write " + path;
    REQUIRE_MESSAGE(std::system(command.c_str()) == 0, command);
  }
  ~NumpyDir() {
    std::error_code ignored;
    fs::remove_all(path, ignored);
  }
};

const std::string& numpy_dir() {
  static const NumpyDir dir;
  return dir.path;
}

std::string file(const std::string& name) { return numpy_dir() + "/" + name; }

std::vector<std::byte> raw_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  const std::vector<char> chars((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::byte> bytes(chars.size());
  std::memcpy(bytes.data(), chars.data(), chars.size());
  return bytes;
}

void check_matches_raw(const NumpyArray& array, const std::string& dtype, ElementType type) {
  CAPTURE(dtype);
  CHECK(array.type == type);
  CHECK(array.shape == std::vector<int64_t>{5, 3, 2});
  const std::vector<std::byte> want = raw_bytes(file(dtype + ".bin"));
  REQUIRE(want.size() == static_cast<size_t>(array.elements()) * element_size(type));
  CHECK(std::memcmp(array.data, want.data(), want.size()) == 0);
}

const std::map<std::string, ElementType> kDtypes = {
    {"bool", ElementType::boolean}, {"int8", ElementType::i8},     {"uint8", ElementType::u8},   {"int16", ElementType::i16},
    {"uint16", ElementType::u16},   {"int32", ElementType::i32},   {"uint32", ElementType::u32}, {"int64", ElementType::i64},
    {"uint64", ElementType::u64},   {"float16", ElementType::f16}, {"float32", ElementType::f32}, {"float64", ElementType::f64}};

TEST_CASE("Numpy.every_dtype_is_read_exactly_from_npy_and_both_kinds_of_npz") {
  for (const auto& [dtype, type] : kDtypes) {
    auto array = read_npy(file(dtype + ".npy"));
    REQUIRE_MESSAGE(array.ok(), array.status().to_string());
    check_matches_raw(*array, dtype, type);
  }
  for (const char* archive : {"stored.npz", "compressed.npz"}) {
    CAPTURE(archive);
    auto members = read_npz(file(archive));
    REQUIRE_MESSAGE(members.ok(), members.status().to_string());
    REQUIRE(members->size() == kDtypes.size());
    for (const auto& [name, array] : *members) check_matches_raw(array, name, kDtypes.at(name));
  }
}

TEST_CASE("Numpy.an_npz_is_a_data_set_whose_arrays_are_fields") {
  auto source = numpy_source({file("examples.npz")});
  REQUIRE_MESSAGE(source.ok(), source.status().to_string());
  CHECK((*source)->name() == "npz file '" + file("examples.npz") + "'");
  CHECK((*source)->size() == 7);
  REQUIRE((*source)->fields().size() == 2u);
  CHECK((*source)->fields()[0].to_string() == "x: f32[4]");
  CHECK((*source)->fields()[1].to_string() == "y: i64[]");
  auto dataset = Dataset::create(*source,
                                 {{.placeholder = "features", .field = "x", .dtype = graph::DType::f64},
                                  {.placeholder = "labels", .field = "y", .dtype = graph::DType::i32}},
                                 {.batch_size = 7, .shuffle = false});
  REQUIRE_MESSAGE(dataset.ok(), dataset.status().to_string());
  auto reader = dataset->epoch(0);
  auto batch = reader.next();
  REQUIRE(batch.ok());
  REQUIRE(batch->has_value());
  const Batch& b = **batch;
  for (int64_t i = 0; i < 28; ++i) CHECK(b["features"].data<double>()[i] == static_cast<double>(i) / 4);
  for (int64_t i = 0; i < 7; ++i) CHECK(b["labels"].data<int32_t>()[i] == i % 3);
  // Files of one data set together: an .npy beside an .npz, which must agree on the examples.
  auto empty = numpy_source({file("empty.npy")});
  REQUIRE(empty.ok());
  CHECK((*empty)->size() == 0);
  CHECK((*empty)->fields()[0].to_string() == "empty: f32[4]");
  CHECK(numpy_source({file("examples.npz"), file("fewer.npy")}).status().message() ==
        "npy file '" + file("fewer.npy") + "', array 'fewer': 6 examples, where 'x' has 7");
}

std::string refusal_of(const std::string& name) {
  auto array = name.ends_with(".npz") ? read_npz(file(name)).status() : read_npy(file(name)).status();
  REQUIRE_FALSE(array.ok());
  CHECK(array.code() == graph::StatusCode::invalid_argument);
  return array.message();
}

TEST_CASE("Numpy.arrays_mirra_cannot_read_are_refused_naming_the_file_and_why") {
  const auto in = [](const std::string& name) { return "npy file '" + file(name) + "': "; };
  CHECK(refusal_of("fortran.npy") == in("fortran.npy") + "Fortran-order arrays are not read; save it in C order, as np.ascontiguousarray(arr)");
  CHECK(refusal_of("big_endian.npy") == in("big_endian.npy") + "big-endian arrays ('>f4') are not read; save it little-endian, as arr.astype('<f4')");
  CHECK(refusal_of("objects.npy").find("dtype '|O' is not read (object arrays are not;") != std::string::npos);
  CHECK(refusal_of("structured.npy") == in("structured.npy") + "a structured dtype (a list of fields) is not read");
  CHECK(refusal_of("complex.npy").find("complex arrays are not") != std::string::npos);
  CHECK(refusal_of("strings.npy").find("string arrays are not") != std::string::npos);
  CHECK(numpy_source({file("scalar.npy")}).status().message() ==
        "npy file '" + file("scalar.npy") + "', array 'scalar': a scalar; each array needs a first dim that counts the examples");
  CHECK(numpy_source({file("float32.bin")}).status().message() == "'" + file("float32.bin") + "' is neither an .npy nor an .npz file");
  CHECK(read_npy(file("missing.npy")).status().message().starts_with("cannot open '" + file("missing.npy") + "'"));
}

// A copy of `name` with `edit` applied to its bytes.
std::string damaged(const std::string& name, const std::function<void(std::vector<std::byte>&)>& edit) {
  std::vector<std::byte> bytes = raw_bytes(file(name));
  edit(bytes);
  const std::string path = file("damaged_" + name);
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  return "damaged_" + name;
}

TEST_CASE("Numpy.truncated_and_damaged_files_are_refused") {
  const std::string cut = damaged("float64.npy", [](std::vector<std::byte>& b) { b.resize(b.size() - 8); });
  CHECK(refusal_of(cut) == "npy file '" + file(cut) + "': truncated: its shape needs 240 bytes of values, it holds 232");
  const std::string headless = damaged("float64.npy", [](std::vector<std::byte>& b) { b.resize(20); });
  CHECK(refusal_of(headless) == "npy file '" + file(headless) + "': truncated in its header");
  const std::string not_npy = damaged("float64.npy", [](std::vector<std::byte>& b) { b[1] = std::byte{'X'}; });
  CHECK(refusal_of(not_npy) == "npy file '" + file(not_npy) + "': not an .npy file (no \\x93NUMPY magic string)");
  // A flipped byte inside a deflated member: inflating fails or its CRC-32 does not match.
  const std::string flipped = damaged("compressed.npz", [](std::vector<std::byte>& b) { b[200] ^= std::byte{0x5a}; });
  const std::string message = refusal_of(flipped);
  CHECK(message.starts_with("npz file '" + file(flipped) + "', member '"));
  CHECK((message.ends_with("damaged (its CRC-32 does not match)") || message.ends_with("truncated or damaged (inflating it failed)") ||
         message.find("not an .npy file") != std::string::npos || message.find("in the header") != std::string::npos));
  const std::string short_zip = damaged("stored.npz", [](std::vector<std::byte>& b) { b.resize(b.size() / 2); });
  CHECK(refusal_of(short_zip) == "npz file '" + file(short_zip) + "': not a zip archive, or a damaged one");
}

TEST_CASE("Numpy.what_mirra_writes_numpy_reads") {
  std::vector<float> scores(24);
  for (size_t i = 0; i < scores.size(); ++i) scores[i] = static_cast<float>(i) * 0.5f;
  const std::vector<int64_t> counts = {3, -1, 7};
  const auto bytes = [](const auto& v) { return std::as_bytes(std::span(v)); };
  const NumpyValues score_values{.type = ElementType::f32, .shape = {2, 3, 4}, .data = bytes(scores)};
  REQUIRE(write_npy(file("written.npy"), score_values).ok());
  REQUIRE(write_npz(file("written.npz"), {{"scores", score_values}, {"counts", {.type = ElementType::i64, .shape = {3}, .data = bytes(counts)}}}).ok());
  // mirra reads its own files back too.
  auto back = read_npy(file("written.npy"));
  REQUIRE(back.ok());
  CHECK(std::memcmp(back->data, scores.data(), scores.size() * sizeof(float)) == 0);
  const std::string command = std::string(MIRRA_SYSTEM_PYTHON) + " " + MIRRA_SOURCE_DIR + "/tests/runtime/numpy_files.py check " + numpy_dir();
  CHECK(std::system(command.c_str()) == 0);
  CHECK(write_npy(file("bad.npy"), {.type = ElementType::f32, .shape = {5}, .data = bytes(counts)}).message() ==
        "npy file '" + file("bad.npy") + "': the values do not fill the shape");
}

}  // namespace
}  // namespace mirra::runtime::data
