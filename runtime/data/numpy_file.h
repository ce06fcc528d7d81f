// NumPy's files: .npy (one array: a magic string, a header that is a Python dict literal of the
// dtype, the order and the shape, then the values) and .npz (a zip of .npy members, stored by
// np.savez or deflated by np.savez_compressed, read with minizip). A .npy file and a stored member are
// mapped, not read, so an array larger than memory is paged in as it is used; a deflated member is
// inflated into memory, its CRC checked. Every numeric dtype and bool are read, little-endian in C
// order; Fortran order, big-endian, object, string, complex and structured arrays are refused with a
// message naming the file and the array. Writing: write_npy and write_npz (stored members).
//
//   auto arrays = read_npz("train.npz");            // [("x", f32[60000,784]), ("y", u8[60000])]
//   auto source = numpy_source({"train.npz"});      // fields x: f32[784] and y: u8[]
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "graph/status.h"
#include "runtime/data/example_source.h"
#include "runtime/data/field.h"

namespace mirra::runtime::data {

struct NumpyArray {
  ElementType type = ElementType::f32;
  std::vector<int64_t> shape;
  const std::byte* data = nullptr;     // prod(shape) values, row-major
  std::shared_ptr<const void> owner;   // keeps `data` alive (the mapping, or the inflated bytes)

  int64_t elements() const;
};

// Parses the bytes of an .npy file (kept alive by `owner`); `name` names it in errors.
graph::Expected<NumpyArray> parse_npy(std::span<const std::byte> bytes, std::shared_ptr<const void> owner,
                                      const std::string& name);
graph::Expected<NumpyArray> read_npy(const std::string& path);
// Every member of an .npz file, by name without ".npy", in the archive's order.
graph::Expected<std::vector<std::pair<std::string, NumpyArray>>> read_npz(const std::string& path);

// A data set of .npy files (each a field named after the file, without its directory and ".npy") and
// .npz files (each member a field): every array's first dim counts the examples, the same for all.
graph::Expected<std::shared_ptr<const ExampleSource>> numpy_source(const std::vector<std::string>& paths);

// An array to write: `shape`'s values of `type` at `data`.
struct NumpyValues {
  ElementType type = ElementType::f32;
  std::vector<int64_t> shape;
  std::span<const std::byte> data;
};
graph::Status write_npy(const std::string& path, const NumpyValues& array);
// Members named name + ".npy", stored, as np.savez writes them.
graph::Status write_npz(const std::string& path, const std::vector<std::pair<std::string, NumpyValues>>& arrays);

}  // namespace mirra::runtime::data
