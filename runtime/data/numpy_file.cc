// .npy headers parsed and written; .npz archives read and written through minizip; the arrays as the
// fields of a data set.
#include "runtime/data/numpy_file.h"

#include <unistd.h>
#include <unzip.h>
#include <zip.h>

#include <cctype>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>

#include "runtime/data/mapped_file.h"

namespace mirra::runtime::data {

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicSize = 6;

// The dict literal's values: a string, a bool, or a tuple of integers.
class HeaderParser {
 public:
  HeaderParser(std::string_view text, std::string name) : text_(text), name_(std::move(name)) {}

  graph::Status parse(std::string& descr, bool& fortran_order, std::vector<int64_t>& shape) {
    bool has_descr = false, has_order = false, has_shape = false;
    MIRRA_RETURN_IF_ERROR(expect('{'));
    for (;;) {
      skip_space();
      if (peek() == '}') break;
      MIRRA_ASSIGN_OR_RETURN(const std::string key, string());
      MIRRA_RETURN_IF_ERROR(expect(':'));
      skip_space();
      if (key == "descr") {
        if (peek() == '[') return error("a structured dtype (a list of fields) is not read");
        MIRRA_ASSIGN_OR_RETURN(descr, string());
        has_descr = true;
      } else if (key == "fortran_order") {
        MIRRA_ASSIGN_OR_RETURN(fortran_order, boolean());
        has_order = true;
      } else if (key == "shape") {
        MIRRA_ASSIGN_OR_RETURN(shape, tuple());
        has_shape = true;
      } else {
        return error("unknown header key '" + key + "'");
      }
      skip_space();
      if (peek() == ',') {
        ++at_;
        continue;
      }
      if (peek() != '}') return error("expected ',' or '}' in the header");
    }
    if (!has_descr || !has_order || !has_shape) return error("the header lacks 'descr', 'fortran_order' or 'shape'");
    return graph::Status();
  }

 private:
  char peek() const { return at_ < text_.size() ? text_[at_] : '\0'; }
  void skip_space() {
    while (at_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[at_]))) ++at_;
  }
  graph::Status error(const std::string& what) const { return graph::invalid_argument(name_ + ": " + what); }
  graph::Status expect(char c) {
    skip_space();
    if (peek() != c) return error(std::string("expected '") + c + "' in the header");
    ++at_;
    return graph::Status();
  }
  graph::Expected<std::string> string() {
    skip_space();
    const char quote = peek();
    if (quote != '\'' && quote != '"') return error("expected a quoted string in the header");
    const size_t end = text_.find(quote, at_ + 1);
    if (end == std::string_view::npos) return error("an unterminated string in the header");
    std::string out(text_.substr(at_ + 1, end - at_ - 1));
    at_ = end + 1;
    return out;
  }
  graph::Expected<bool> boolean() {
    if (text_.substr(at_, 4) == "True") {
      at_ += 4;
      return true;
    }
    if (text_.substr(at_, 5) == "False") {
      at_ += 5;
      return false;
    }
    return error("'fortran_order' is neither True nor False");
  }
  graph::Expected<std::vector<int64_t>> tuple() {
    MIRRA_RETURN_IF_ERROR(expect('('));
    std::vector<int64_t> dims;
    for (;;) {
      skip_space();
      if (peek() == ')') break;
      if (!std::isdigit(static_cast<unsigned char>(peek()))) return error("a dim of 'shape' is not a non-negative integer");
      int64_t d = 0;
      while (std::isdigit(static_cast<unsigned char>(peek()))) {
        if (d > (std::numeric_limits<int64_t>::max() - 9) / 10) return error("a dim of 'shape' is too large");
        d = d * 10 + (text_[at_++] - '0');
      }
      dims.push_back(d);
      skip_space();
      if (peek() == ',') ++at_;
      else if (peek() != ')') return error("expected ',' or ')' in 'shape'");
    }
    ++at_;
    return dims;
  }

  std::string_view text_;
  std::string name_;
  size_t at_ = 0;
};

// A dtype string ("<f4", "|u1", "<i8") as an element type.
graph::Expected<ElementType> element_type_of_descr(const std::string& descr, const std::string& name) {
  if (descr.size() < 2) return graph::invalid_argument(name + ": dtype '" + descr + "' is not a numeric dtype");
  const char order = descr[0], kind = descr[1];
  const std::string size = descr.substr(2);
  if (order == '>') {
    return graph::invalid_argument(name + ": big-endian arrays ('" + descr + "') are not read; save it little-endian, "
                                          "as arr.astype('<" + descr.substr(1) + "')");
  }
  if (order != '<' && order != '|' && order != '=') return graph::invalid_argument(name + ": dtype '" + descr + "' has no byte order");
  struct Known {
    char kind;
    const char* size;
    ElementType type;
  };
  static constexpr Known kKnown[] = {{'b', "1", ElementType::boolean}, {'i', "1", ElementType::i8},  {'u', "1", ElementType::u8},
                                     {'i', "2", ElementType::i16},     {'u', "2", ElementType::u16}, {'i', "4", ElementType::i32},
                                     {'u', "4", ElementType::u32},     {'i', "8", ElementType::i64}, {'u', "8", ElementType::u64},
                                     {'f', "2", ElementType::f16},     {'f', "4", ElementType::f32}, {'f', "8", ElementType::f64}};
  for (const Known& k : kKnown) {
    if (k.kind == kind && size == k.size) return k.type;
  }
  const char* what = kind == 'O'                ? "object arrays are"
                     : kind == 'U' || kind == 'S' ? "string arrays are"
                     : kind == 'c'                ? "complex arrays are"
                     : kind == 'V'                ? "structured arrays are"
                                                  : "this dtype is";
  return graph::invalid_argument(name + ": dtype '" + descr + "' is not read (" + what +
                                 " not; bool, integers of 8 to 64 bits and floats of 16, 32 and 64 are)");
}

uint32_t little_endian(const std::byte* p, size_t bytes) {
  uint32_t value = 0;
  for (size_t i = 0; i < bytes; ++i) value |= static_cast<uint32_t>(p[i]) << (8 * i);
  return value;
}

// The .npy header of `array`: magic, version 1.0 (or 2.0 for a header past 64 KiB), the dict, padded
// with spaces and a newline so that the values start at a multiple of 64 bytes.
std::string npy_header(const NumpyValues& array) {
  static constexpr const char* kDescr[] = {"|b1", "|i1", "|u1", "<i2", "<u2", "<i4", "<u4", "<i8", "<u8", "<f2", "", "<f4", "<f8"};
  std::string shape;  // as Python writes a tuple: (), (3,), (3, 4)
  for (size_t i = 0; i < array.shape.size(); ++i) shape += (i > 0 ? ", " : "") + std::to_string(array.shape[i]);
  if (array.shape.size() == 1) shape += ",";
  std::string dict = "{'descr': '" + std::string(kDescr[static_cast<size_t>(array.type)]) +
                     "', 'fortran_order': False, 'shape': (" + shape + "), }";
  const bool wide = dict.size() + 11 >= 65536;
  const size_t prefix = kMagicSize + 2 + (wide ? 4 : 2);
  size_t total = prefix + dict.size() + 1;
  total = (total + 63) / 64 * 64;
  dict.append(total - prefix - dict.size() - 1, ' ');
  dict += '\n';
  std::string header(kMagic, kMagicSize);
  header += static_cast<char>(wide ? 2 : 1);
  header += '\0';
  const size_t length = dict.size();
  for (size_t i = 0; i < (wide ? 4u : 2u); ++i) header += static_cast<char>((length >> (8 * i)) & 0xff);
  return header + dict;
}

graph::Status check_writable(const NumpyValues& array, const std::string& name) {
  if (array.type == ElementType::bf16) return graph::invalid_argument(name + ": NumPy has no bf16 dtype");
  int64_t elements = 1;
  for (int64_t d : array.shape) {
    if (d < 0) return graph::invalid_argument(name + ": a negative dim");
    elements *= d;
  }
  if (static_cast<size_t>(elements) * element_size(array.type) != array.data.size()) {
    return graph::invalid_argument(name + ": the values do not fill the shape");
  }
  return graph::Status();
}

std::string file_stem(const std::string& path) {
  std::string stem = std::filesystem::path(path).filename().string();
  if (stem.size() > 4 && stem.ends_with(".npy")) stem.resize(stem.size() - 4);
  return stem;
}

// Physical memory: the most a deflated member may claim to inflate to.
size_t physical_memory() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? static_cast<size_t>(pages) * static_cast<size_t>(page) : size_t{1} << 40;
}

}  // namespace

int64_t NumpyArray::elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

graph::Expected<NumpyArray> parse_npy(std::span<const std::byte> bytes, std::shared_ptr<const void> owner,
                                      const std::string& name) {
  if (bytes.size() < kMagicSize + 4 || std::memcmp(bytes.data(), kMagic, kMagicSize) != 0) {
    return graph::invalid_argument(name + ": not an .npy file (no \\x93NUMPY magic string)");
  }
  const int major = static_cast<int>(bytes[kMagicSize]);
  if (major < 1 || major > 3) return graph::invalid_argument(name + ": .npy format version " + std::to_string(major) + " is not read");
  const size_t length_bytes = major == 1 ? 2 : 4;
  const size_t prefix = kMagicSize + 2 + length_bytes;
  if (bytes.size() < prefix) return graph::invalid_argument(name + ": truncated in its header");
  const size_t header_length = little_endian(bytes.data() + kMagicSize + 2, length_bytes);
  if (bytes.size() - prefix < header_length) return graph::invalid_argument(name + ": truncated in its header");
  const std::string_view header(reinterpret_cast<const char*>(bytes.data() + prefix), header_length);
  std::string descr;
  bool fortran_order = false;
  NumpyArray array;
  MIRRA_RETURN_IF_ERROR(HeaderParser(header, name).parse(descr, fortran_order, array.shape));
  MIRRA_ASSIGN_OR_RETURN(array.type, element_type_of_descr(descr, name));
  if (fortran_order && array.shape.size() > 1) {
    return graph::invalid_argument(name + ": Fortran-order arrays are not read; save it in C order, as np.ascontiguousarray(arr)");
  }
  size_t values = element_size(array.type);
  for (int64_t d : array.shape) {
    if (__builtin_mul_overflow(values, static_cast<size_t>(d), &values)) return graph::invalid_argument(name + ": its shape overflows");
  }
  const size_t available = bytes.size() - prefix - header_length;
  if (available < values) {
    return graph::invalid_argument(name + ": truncated: its shape needs " + std::to_string(values) + " bytes of values, it holds " +
                                   std::to_string(available));
  }
  array.data = bytes.data() + prefix + header_length;
  array.owner = std::move(owner);
  return array;
}

graph::Expected<NumpyArray> read_npy(const std::string& path) {
  MIRRA_ASSIGN_OR_RETURN(std::shared_ptr<const MappedFile> file, MappedFile::open(path));
  const std::span<const std::byte> bytes = file->bytes();
  return parse_npy(bytes, std::move(file), "npy file '" + path + "'");
}

graph::Expected<std::vector<std::pair<std::string, NumpyArray>>> read_npz(const std::string& path) {
  const std::string name = "npz file '" + path + "'";
  MIRRA_ASSIGN_OR_RETURN(std::shared_ptr<const MappedFile> file, MappedFile::open(path));
  const std::unique_ptr<void, int (*)(unzFile)> zip(unzOpen64(path.c_str()), unzClose);
  if (zip == nullptr) return graph::invalid_argument(name + ": not a zip archive, or a damaged one");
  std::vector<std::pair<std::string, NumpyArray>> arrays;
  for (int status = unzGoToFirstFile(zip.get()); status != UNZ_END_OF_LIST_OF_FILE; status = unzGoToNextFile(zip.get())) {
    if (status != UNZ_OK) return graph::invalid_argument(name + ": a damaged zip directory");
    unz_file_info64 info{};
    char member_name[1024] = {};
    if (unzGetCurrentFileInfo64(zip.get(), &info, member_name, sizeof(member_name) - 1, nullptr, 0, nullptr, 0) != UNZ_OK) {
      return graph::invalid_argument(name + ": a damaged zip directory entry");
    }
    std::string member = member_name;
    const std::string where = name + ", member '" + member + "'";
    if (!member.ends_with(".npy")) return graph::invalid_argument(where + ": not an .npy array");
    if (unzOpenCurrentFile(zip.get()) != UNZ_OK) return graph::invalid_argument(where + ": cannot be opened");
    NumpyArray array;
    if (info.compression_method == 0) {
      // Stored: its bytes lie in the file as they are, mapped.
      const uint64_t offset = unzGetCurrentFileZStreamPos64(zip.get());
      const std::span<const std::byte> all = file->bytes();
      if (info.compressed_size != info.uncompressed_size || offset > all.size() || all.size() - offset < info.uncompressed_size) {
        unzCloseCurrentFile(zip.get());
        return graph::invalid_argument(where + ": truncated or damaged");
      }
      auto parsed = parse_npy(all.subspan(offset, info.uncompressed_size), file, where);
      unzCloseCurrentFile(zip.get());
      MIRRA_ASSIGN_OR_RETURN(array, std::move(parsed));
    } else {
      if (info.uncompressed_size > physical_memory()) {
        unzCloseCurrentFile(zip.get());
        return graph::invalid_argument(where + ": claims " + std::to_string(info.uncompressed_size) +
                                       " bytes inflated, more than this machine's memory");
      }
      auto inflated = std::make_shared<std::vector<std::byte>>(info.uncompressed_size);
      size_t done = 0;
      while (done < inflated->size()) {
        const unsigned chunk = static_cast<unsigned>(std::min<size_t>(inflated->size() - done, size_t{1} << 30));
        const int read = unzReadCurrentFile(zip.get(), inflated->data() + done, chunk);
        if (read <= 0) break;
        done += static_cast<size_t>(read);
      }
      const int closed = unzCloseCurrentFile(zip.get());
      if (done != inflated->size()) return graph::invalid_argument(where + ": truncated or damaged (inflating it failed)");
      if (closed == UNZ_CRCERROR) return graph::invalid_argument(where + ": damaged (its CRC-32 does not match)");
      if (closed != UNZ_OK) return graph::invalid_argument(where + ": damaged");
      const std::span<const std::byte> bytes(inflated->data(), inflated->size());
      MIRRA_ASSIGN_OR_RETURN(array, parse_npy(bytes, inflated, where));
    }
    member.resize(member.size() - 4);
    arrays.emplace_back(std::move(member), std::move(array));
  }
  return arrays;
}

graph::Expected<std::shared_ptr<const ExampleSource>> numpy_source(const std::vector<std::string>& paths) {
  if (paths.empty()) return graph::invalid_argument("a NumPy data set needs at least one .npy or .npz file");
  std::vector<std::pair<std::string, NumpyArray>> arrays;
  std::vector<std::string> origins;  // each array's file, for errors
  for (const std::string& path : paths) {
    if (path.ends_with(".npz")) {
      MIRRA_ASSIGN_OR_RETURN(auto members, read_npz(path));
      for (auto& member : members) {
        arrays.push_back(std::move(member));
        origins.push_back("npz file '" + path + "'");
      }
    } else if (path.ends_with(".npy")) {
      MIRRA_ASSIGN_OR_RETURN(NumpyArray array, read_npy(path));
      arrays.emplace_back(file_stem(path), std::move(array));
      origins.push_back("npy file '" + path + "'");
    } else {
      return graph::invalid_argument("'" + path + "' is neither an .npy nor an .npz file");
    }
  }
  std::string name = paths.size() == 1 ? origins[0] : "NumPy files '" + paths[0] + "' and " + std::to_string(paths.size() - 1) + " more";
  std::vector<ArrayField> fields;
  int64_t examples = -1;
  for (size_t i = 0; i < arrays.size(); ++i) {
    auto& [field, array] = arrays[i];
    if (array.shape.empty()) {
      return graph::invalid_argument(origins[i] + ", array '" + field + "': a scalar; each array needs a first dim that counts the examples");
    }
    if (examples >= 0 && array.shape[0] != examples) {
      return graph::invalid_argument(origins[i] + ", array '" + field + "': " + std::to_string(array.shape[0]) +
                                     " examples, where '" + arrays[0].first + "' has " + std::to_string(examples));
    }
    examples = array.shape[0];
    fields.push_back({.field = {.name = field, .type = array.type, .shape = std::vector<int64_t>(array.shape.begin() + 1, array.shape.end())},
                      .data = array.data,
                      .owner = array.owner});
  }
  MIRRA_ASSIGN_OR_RETURN(auto source, ArraySource::create(std::move(name), std::move(fields), std::max<int64_t>(examples, 0)));
  return std::shared_ptr<const ExampleSource>(std::move(source));
}

graph::Status write_npy(const std::string& path, const NumpyValues& array) {
  MIRRA_RETURN_IF_ERROR(check_writable(array, "npy file '" + path + "'"));
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  const std::string header = npy_header(array);
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  out.write(reinterpret_cast<const char*>(array.data.data()), static_cast<std::streamsize>(array.data.size()));
  out.close();
  if (!out) return graph::invalid_argument("cannot write npy file '" + path + "'");
  return graph::Status();
}

graph::Status write_npz(const std::string& path, const std::vector<std::pair<std::string, NumpyValues>>& arrays) {
  const std::string name = "npz file '" + path + "'";
  for (const auto& [member, array] : arrays) MIRRA_RETURN_IF_ERROR(check_writable(array, name + ", array '" + member + "'"));
  zipFile zip = zipOpen64(path.c_str(), APPEND_STATUS_CREATE);
  if (zip == nullptr) return graph::invalid_argument("cannot write " + name);
  bool ok = true;
  for (const auto& [member, array] : arrays) {
    const std::string header = npy_header(array);
    const std::string file = member + ".npy";
    const zip_fileinfo info{};
    ok = ok && zipOpenNewFileInZip64(zip, file.c_str(), &info, nullptr, 0, nullptr, 0, nullptr, 0, 0, /*zip64=*/1) == ZIP_OK;
    ok = ok && zipWriteInFileInZip(zip, header.data(), static_cast<unsigned>(header.size())) == ZIP_OK;
    for (size_t done = 0; ok && done < array.data.size();) {
      const unsigned chunk = static_cast<unsigned>(std::min<size_t>(array.data.size() - done, size_t{1} << 30));
      ok = zipWriteInFileInZip(zip, array.data.data() + done, chunk) == ZIP_OK;
      done += chunk;
    }
    ok = ok && zipCloseFileInZip(zip) == ZIP_OK;
  }
  ok = zipClose(zip, nullptr) == ZIP_OK && ok;
  if (!ok) return graph::invalid_argument("writing " + name + " failed");
  return graph::Status();
}

}  // namespace mirra::runtime::data
