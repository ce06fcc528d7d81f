// convert_values: one loop per (field type, placeholder dtype) pair, with the bytes-to-f32 scaling of
// image data vectorised for the CPU's widest vectors (this file is compiled at -O3).
#include "runtime/data/value_conversion.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "graph/float16.h"
#include "runtime/vector_clones.h"

namespace mirra::runtime::data {

namespace {

template <class T>
struct Type {
  using type = T;
};

template <class F>
decltype(auto) visit_element(ElementType type, F&& f) {
  switch (type) {
    case ElementType::boolean: return f(Type<bool>{});
    case ElementType::i8: return f(Type<int8_t>{});
    case ElementType::u8: return f(Type<uint8_t>{});
    case ElementType::i16: return f(Type<int16_t>{});
    case ElementType::u16: return f(Type<uint16_t>{});
    case ElementType::i32: return f(Type<int32_t>{});
    case ElementType::u32: return f(Type<uint32_t>{});
    case ElementType::i64: return f(Type<int64_t>{});
    case ElementType::u64: return f(Type<uint64_t>{});
    case ElementType::f16: return f(Type<graph::float16>{});
    case ElementType::bf16: return f(Type<graph::bfloat16>{});
    case ElementType::f32: return f(Type<float>{});
    case ElementType::f64: return f(Type<double>{});
  }
  return f(Type<float>{});
}

// The C++ type of a placeholder's dtype.
template <class F>
decltype(auto) visit_dtype(graph::DType dtype, F&& f) {
  switch (dtype) {
    case graph::DType::f32: return f(Type<float>{});
    case graph::DType::f64: return f(Type<double>{});
    case graph::DType::i32: return f(Type<int32_t>{});
    case graph::DType::i64: return f(Type<int64_t>{});
    case graph::DType::u8: return f(Type<uint8_t>{});
    case graph::DType::boolean: return f(Type<bool>{});
    case graph::DType::bf16: return f(Type<graph::bfloat16>{});
    case graph::DType::f16: return f(Type<graph::float16>{});
  }
  return f(Type<float>{});
}

template <class T>
constexpr bool kSixteenBit = std::is_same_v<T, graph::float16> || std::is_same_v<T, graph::bfloat16>;
template <class T>
constexpr bool kFloating = std::is_floating_point_v<T> || kSixteenBit<T>;

// A value as the wide type its arithmetic runs in: double for f64 placeholders, float otherwise.
template <class Wide, class T>
Wide widen(T value) {
  if constexpr (kSixteenBit<T>) {
    return static_cast<Wide>(static_cast<float>(value));
  } else {
    return static_cast<Wide>(value);
  }
}

template <class To, class Wide>
To narrow(Wide value) {
  if constexpr (kSixteenBit<To>) {
    return To(static_cast<float>(value));
  } else {
    return static_cast<To>(value);
  }
}

// Whether an integer `value` fits integer (or bool) type To.
template <class To, class From>
bool fits(From value) {
  if constexpr (std::is_same_v<To, bool>) {
    return true;
  } else if constexpr (std::is_same_v<From, bool>) {
    return true;
  } else {
    return std::in_range<To>(value);
  }
}

// Bytes scaled into floats: the pixels of image data.
MIRRA_VECTOR_CLONES void scale_bytes(const uint8_t* bytes, float* out, int64_t n, float scale, float shift) {
  for (int64_t j = 0; j < n; ++j) out[j] = static_cast<float>(bytes[j]) * scale + shift;
}

std::string where(int64_t i) { return "value " + std::to_string(i); }

template <class From, class To>
graph::Status convert_typed(const ValueConversion& c, const From* in, int64_t count, To* out) {
  if (c.one_hot > 0) {  // integer fields only (check_conversion)
    if constexpr (std::is_integral_v<From> && !std::is_same_v<From, bool>) {
      std::memset(static_cast<void*>(out), 0, static_cast<size_t>(count * c.one_hot) * sizeof(To));
      for (int64_t i = 0; i < count; ++i) {
        const From v = in[i];
        if (!(v >= 0 && static_cast<uint64_t>(v) < static_cast<uint64_t>(c.one_hot))) {
          return graph::invalid_argument(where(i) + " is class " + std::to_string(v) + ", outside [0, " +
                                         std::to_string(c.one_hot) + ")");
        }
        out[i * c.one_hot + static_cast<int64_t>(v)] = narrow<To>(1.0f);
      }
    }
    return graph::Status();
  }
  if constexpr (kFloating<To>) {
    using Wide = std::conditional_t<std::is_same_v<To, double>, double, float>;
    if (c.scale.empty()) {
      for (int64_t i = 0; i < count; ++i) out[i] = narrow<To>(widen<Wide>(in[i]));
      return graph::Status();
    }
    const size_t channels = c.scale.size();
    if constexpr (std::is_same_v<From, uint8_t> && std::is_same_v<To, float>) {
      if (channels == 1) {
        scale_bytes(in, out, count, static_cast<float>(c.scale[0]), static_cast<float>(c.shift[0]));
        return graph::Status();
      }
    }
    std::vector<Wide> scale(channels), shift(channels);
    for (size_t k = 0; k < channels; ++k) {
      scale[k] = static_cast<Wide>(c.scale[k]);
      shift[k] = static_cast<Wide>(c.shift[k]);
    }
    for (int64_t i = 0; i < count; ++i) {
      const size_t k = static_cast<size_t>(i) % channels;
      out[i] = narrow<To>(widen<Wide>(in[i]) * scale[k] + shift[k]);
    }
    return graph::Status();
  } else if constexpr (!kFloating<From>) {
    for (int64_t i = 0; i < count; ++i) {
      if (!fits<To>(in[i])) {
        return graph::invalid_argument(where(i) + " is " + std::to_string(in[i]) + ", which " +
                                       std::string(graph::dtype_name(graph::dtype_of<To>())) + " cannot hold");
      }
      if constexpr (std::is_same_v<To, bool>) {
        out[i] = in[i] != 0;
      } else {
        out[i] = static_cast<To>(in[i]);
      }
    }
    return graph::Status();
  } else {
    return graph::invalid_argument("a floating field does not feed an integer placeholder");
  }
}

}  // namespace

graph::Status check_conversion(const ValueConversion& c, const std::string& what) {
  const bool to_floating = graph::is_floating(c.to);
  if (is_floating(c.from) && !to_floating) {
    return graph::invalid_argument(what + ": a " + std::string(element_type_name(c.from)) + " field does not feed an " +
                                   std::string(graph::dtype_name(c.to)) + " placeholder (its values are not integers)");
  }
  if (c.scale.size() != c.shift.size()) return graph::invalid_argument(what + ": the normalisation's scale and shift differ in size");
  if (!c.scale.empty() && !to_floating) {
    return graph::invalid_argument(what + ": only values fed to a floating placeholder can be normalised, not " +
                                   std::string(graph::dtype_name(c.to)));
  }
  for (size_t k = 0; k < c.scale.size(); ++k) {
    if (!std::isfinite(c.scale[k]) || !std::isfinite(c.shift[k])) return graph::invalid_argument(what + ": a normalisation that is not finite");
  }
  if (c.one_hot < 0) return graph::invalid_argument(what + ": one_hot must be positive");
  if (c.one_hot > 0) {
    if (!is_integer(c.from)) {
      return graph::invalid_argument(what + ": one_hot needs an integer field, not " + std::string(element_type_name(c.from)));
    }
    if (!c.scale.empty()) return graph::invalid_argument(what + ": one_hot values are not normalised");
  }
  return graph::Status();
}

graph::Status convert_values(const ValueConversion& c, const std::byte* in, int64_t count, std::byte* out) {
  return visit_element(c.from, [&]<class From>(Type<From>) {
    return visit_dtype(c.to, [&]<class To>(Type<To>) {
      return convert_typed<From, To>(c, reinterpret_cast<const From*>(in), count, reinterpret_cast<To*>(out));
    });
  });
}

}  // namespace mirra::runtime::data
