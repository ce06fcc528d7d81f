// ExampleSource: a data set whose examples are read at random, by index, each a value of every field
// (or, for a StreamSource, only in order).
// ArraySource is the common kind: each field one array of all the examples ([size, shape...],
// contiguous), in memory or mapped from a file (IDX, npy, npz members, CSV columns), so a file larger
// than memory is read as the batches need it.
//
//   auto source = ArraySource::create("npz 'train.npz'", {images, labels}, 60000);
//   std::byte* out[] = {image_buffer, nullptr};      // only the fields asked for
//   (*source)->read(123, {.seed = 7, .epoch = 0}, out);
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "graph/status.h"
#include "runtime/data/field.h"

namespace mirra::runtime::data {

// Which draw of an example is read: the data set's seed and the epoch (sources whose examples differ
// from epoch to epoch, such as windows at random offsets, draw from them).
struct Draw {
  uint64_t seed = 0;
  int64_t epoch = 0;
};

class ExampleSource {
 public:
  virtual ~ExampleSource() = default;

  // Names the data set in errors: "npz file 'train.npz'".
  virtual const std::string& name() const = 0;
  virtual const std::vector<Field>& fields() const = 0;
  virtual int64_t size() const = 0;
  // Copies example `index`'s value of each field f whose out[f] is not null into out[f]
  // (fields()[f].bytes() bytes), as `draw` draws it. Called from any thread.
  virtual graph::Status read(int64_t index, const Draw& draw, std::span<std::byte* const> out) const = 0;
  // Where example `index`'s value of field f already lies in memory, for every epoch (arrays), so a
  // batch converts it from there without a copy; null: read() copies it.
  virtual const std::byte* row(size_t /*field*/, int64_t /*index*/) const { return nullptr; }
  // The source as a stream, where its records are read only in order (runtime/data/stream_source.h);
  // null: read() reads any example.
  virtual const class StreamSource* stream() const { return nullptr; }

  // The index of the field called `field`, or an error naming the data set and listing its fields.
  graph::Expected<size_t> field_index(std::string_view field) const;
};

// One field's values for every example, [size, shape...] in row-major order, kept alive by `owner`.
struct ArrayField {
  Field field;
  const std::byte* data = nullptr;
  std::shared_ptr<const void> owner;
};

// An ArrayField holding `values` itself.
template <class T>
ArrayField owned_array(Field field, std::vector<T> values) {
  auto owner = std::make_shared<const std::vector<T>>(std::move(values));
  return {std::move(field), reinterpret_cast<const std::byte*>(owner->data()), owner};
}

class ArraySource final : public ExampleSource {
 public:
  // Every array must hold `size` examples of its field; names must be unique.
  static graph::Expected<std::shared_ptr<const ArraySource>> create(std::string name, std::vector<ArrayField> arrays,
                                                                    int64_t size);

  const std::string& name() const override { return name_; }
  const std::vector<Field>& fields() const override { return fields_; }
  int64_t size() const override { return size_; }
  graph::Status read(int64_t index, const Draw& draw, std::span<std::byte* const> out) const override;
  // In place where the array is aligned for its elements; a misaligned one (an npz member after its
  // zip header) is copied by read().
  const std::byte* row(size_t field, int64_t index) const override {
    return aligned_[field] ? arrays_[field].data + static_cast<size_t>(index) * fields_[field].bytes() : nullptr;
  }

  // Every example's values of field f at once ([size, shape...]): for checks over a whole field.
  const std::byte* values(size_t f) const { return arrays_[f].data; }

 private:
  ArraySource() = default;

  std::string name_;
  std::vector<ArrayField> arrays_;
  std::vector<Field> fields_;
  std::vector<bool> aligned_;
  int64_t size_ = 0;
};

}  // namespace mirra::runtime::data
