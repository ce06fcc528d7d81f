// ExampleSource's field lookup, a StreamSource's refusal to read at random, and ArraySource: checks when made, row copies when read.
#include "runtime/data/example_source.h"

#include "runtime/data/stream_source.h"

#include <cstdint>
#include <cstring>
#include <set>

namespace mirra::runtime::data {

graph::Expected<size_t> ExampleSource::field_index(std::string_view field) const {
  const std::vector<Field>& all = fields();
  std::string names;
  for (size_t f = 0; f < all.size(); ++f) {
    if (all[f].name == field) return f;
    names += (f == 0 ? "" : ", ") + all[f].to_string();
  }
  return graph::invalid_argument(name() + " has no field '" + std::string(field) + "' (its fields: " +
                                 (names.empty() ? std::string("none") : names) + ")");
}

graph::Status StreamSource::read(int64_t index, const Draw& /*draw*/, std::span<std::byte* const> /*out*/) const {
  return graph::unimplemented(name() + ": example " + std::to_string(index) +
                              " cannot be read at random: the data set is read in order");
}

graph::Expected<std::shared_ptr<const ArraySource>> ArraySource::create(std::string name, std::vector<ArrayField> arrays,
                                                                        int64_t size) {
  if (size < 0) return graph::invalid_argument(name + ": a negative number of examples");
  std::set<std::string> seen;
  for (const ArrayField& array : arrays) {
    if (!seen.insert(array.field.name).second) {
      return graph::invalid_argument(name + ": two fields are called '" + array.field.name + "'");
    }
    for (int64_t d : array.field.shape) {
      if (d < 0) return graph::invalid_argument(name + ": field " + array.field.to_string() + " has a negative dim");
    }
    if (array.data == nullptr && size > 0 && array.field.bytes() > 0) {
      return graph::invalid_argument(name + ": field '" + array.field.name + "' has no values");
    }
  }
  auto source = std::shared_ptr<ArraySource>(new ArraySource());
  source->name_ = std::move(name);
  source->size_ = size;
  for (const ArrayField& array : arrays) {
    source->fields_.push_back(array.field);
    source->aligned_.push_back(reinterpret_cast<uintptr_t>(array.data) % element_size(array.field.type) == 0);
  }
  source->arrays_ = std::move(arrays);
  return std::shared_ptr<const ArraySource>(std::move(source));
}

graph::Status ArraySource::read(int64_t index, const Draw& /*draw*/, std::span<std::byte* const> out) const {
  if (index < 0 || index >= size_) {
    return graph::invalid_argument(name_ + ": example " + std::to_string(index) + " of " + std::to_string(size_) +
                                   " does not exist");
  }
  for (size_t f = 0; f < arrays_.size() && f < out.size(); ++f) {
    if (out[f] == nullptr) continue;
    const size_t bytes = fields_[f].bytes();
    std::memcpy(out[f], arrays_[f].data + static_cast<size_t>(index) * bytes, bytes);
  }
  return graph::Status();
}

}  // namespace mirra::runtime::data
