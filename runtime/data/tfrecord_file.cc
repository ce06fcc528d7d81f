// TFRecord: files mapped (or inflated), records indexed and checked, Examples parsed with protobuf and
// their features copied or decoded into fields.
#include "runtime/data/tfrecord_file.h"

#include <isa-l/crc.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cstring>

#include "runtime/data/example.pb.h"
#include "runtime/data/image_decoding.h"
#include "runtime/data/mapped_file.h"

namespace mirra::runtime::data {

namespace {

constexpr uint32_t kMaskDelta = 0xa282ead8u;
constexpr size_t kHeaderBytes = 12;  // the length and its CRC
constexpr size_t kFooterBytes = 4;   // the data's CRC

uint32_t read_u32(const std::byte* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;  // little-endian, as x86-64 is
}

uint64_t read_u64(const std::byte* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

size_t physical_memory() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? static_cast<size_t>(pages) * static_cast<size_t>(page) : size_t{1} << 40;
}

// A GZIP file's bytes inflated (every member, as gzip concatenates them).
graph::Expected<std::shared_ptr<const std::vector<std::byte>>> inflate_gzip(std::span<const std::byte> in, const std::string& name) {
  auto out = std::make_shared<std::vector<std::byte>>();
  z_stream z{};
  if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) return graph::internal_error("zlib could not start");
  z.next_in = reinterpret_cast<Bytef*>(const_cast<std::byte*>(in.data()));
  z.avail_in = static_cast<uInt>(std::min<size_t>(in.size(), UINT32_MAX));
  size_t consumed_before = 0;
  int status = Z_OK;
  const size_t limit = physical_memory();
  while (true) {
    if (out->size() - z.total_out < (size_t{1} << 20)) out->resize(out->size() + (size_t{1} << 22));
    if (out->size() > limit) {
      inflateEnd(&z);
      return graph::invalid_argument(name + ": inflates to more than this machine's memory");
    }
    z.next_out = reinterpret_cast<Bytef*>(out->data() + z.total_out);
    z.avail_out = static_cast<uInt>(std::min<size_t>(out->size() - z.total_out, UINT32_MAX));
    status = inflate(&z, Z_NO_FLUSH);
    if (status == Z_STREAM_END) {
      const size_t consumed = consumed_before + z.total_in;
      if (consumed >= in.size()) break;
      // Another gzip member follows.
      const size_t produced = z.total_out;
      consumed_before = consumed;
      inflateReset(&z);
      z.total_out = produced;
      z.next_in = reinterpret_cast<Bytef*>(const_cast<std::byte*>(in.data() + consumed));
      z.avail_in = static_cast<uInt>(std::min<size_t>(in.size() - consumed, UINT32_MAX));
      continue;
    }
    if (status != Z_OK) {
      inflateEnd(&z);
      return graph::invalid_argument(name + ": not a GZIP file, or a damaged or truncated one (zlib: " +
                                     (z.msg != nullptr ? std::string(z.msg) : std::to_string(status)) + ")");
    }
    if (z.avail_in == 0 && consumed_before + z.total_in >= in.size()) {
      inflateEnd(&z);
      return graph::invalid_argument(name + ": a truncated GZIP file");
    }
  }
  out->resize(z.total_out);
  inflateEnd(&z);
  return std::shared_ptr<const std::vector<std::byte>>(std::move(out));
}

struct RecordFile {
  std::string name;  // "TFRecord file 'x'"
  std::span<const std::byte> bytes;
  std::shared_ptr<const void> owner;
};

struct Record {
  uint32_t file = 0;
  uint64_t offset = 0;  // of its header
  uint64_t length = 0;
  int64_t number = 0;   // in its file, from 0
};

std::string record_name(const RecordFile& file, const Record& record) {
  return file.name + ", record " + std::to_string(record.number) + " at byte " + std::to_string(record.offset);
}

class TfRecords final : public ExampleSource {
 public:
  TfRecords(std::string name, std::vector<RecordFile> files, std::vector<Record> records, TfRecordOptions options)
      : name_(std::move(name)), files_(std::move(files)), records_(std::move(records)), options_(std::move(options)) {
    for (const auto& [feature, spec] : options_.features) {
      fields_.push_back({feature, spec.type == "int64" ? ElementType::i64 : spec.type == "float" ? ElementType::f32 : ElementType::u8,
                         spec.shape});
      specs_.push_back(&options_.features.at(feature));
    }
  }

  const std::string& name() const override { return name_; }
  const std::vector<Field>& fields() const override { return fields_; }
  int64_t size() const override { return static_cast<int64_t>(records_.size()); }

  graph::Status read(int64_t index, const Draw& /*draw*/, std::span<std::byte* const> out) const override {
    if (index < 0 || index >= size()) {
      return graph::invalid_argument(name_ + ": example " + std::to_string(index) + " does not exist");
    }
    const Record& record = records_[static_cast<size_t>(index)];
    const RecordFile& file = files_[record.file];
    const std::span<const std::byte> data = file.bytes.subspan(record.offset + kHeaderBytes, record.length);
    if (masked_crc32c(data) != read_u32(data.data() + record.length)) {
      return graph::invalid_argument(record_name(file, record) + ": corrupt (its data's CRC-32C does not match)");
    }
    tfrecord::Example example;
    if (!example.ParseFromArray(data.data(), static_cast<int>(record.length))) {
      return graph::invalid_argument(record_name(file, record) + ": not a tf.train.Example");
    }
    const auto& features = example.features().feature();
    for (size_t f = 0; f < fields_.size() && f < out.size(); ++f) {
      if (out[f] == nullptr) continue;
      const auto found = features.find(fields_[f].name);
      const std::string where = record_name(file, record) + ", feature '" + fields_[f].name + "'";
      if (found == features.end()) {
        std::vector<std::string> sorted;
        for (const auto& [name, value] : features) sorted.push_back(name);
        std::sort(sorted.begin(), sorted.end());  // a map's order is protobuf's to choose
        std::string names;
        for (const std::string& name : sorted) names += (names.empty() ? "" : ", ") + name;
        return graph::invalid_argument(record_name(file, record) + " has no feature '" + fields_[f].name + "' (its features: " +
                                       (names.empty() ? std::string("none") : names) + ")");
      }
      MIRRA_RETURN_IF_ERROR(copy_feature(found->second, *specs_[f], fields_[f], out[f], where));
    }
    return graph::Status();
  }

 private:
  static graph::Status copy_feature(const tfrecord::Feature& feature, const TfFeature& spec, const Field& field, std::byte* out,
                                    const std::string& where) {
    const int64_t want = field.elements();
    const auto count_error = [&](int64_t got) {
      return graph::invalid_argument(where + ": " + std::to_string(got) + " values, where its shape " +
                                     field.to_string().substr(field.name.size() + 2) + " holds " + std::to_string(want));
    };
    const char* kinds[] = {"none", "bytes", "float", "int64"};
    const std::string kind = kinds[static_cast<int>(feature.kind_case())];
    if (kind != spec.type) return graph::invalid_argument(where + ": a " + kind + " list, not " + spec.type);
    if (spec.type == "int64") {
      if (feature.int64_list().value_size() != want) return count_error(feature.int64_list().value_size());
      std::memcpy(out, feature.int64_list().value().data(), static_cast<size_t>(want) * sizeof(int64_t));
      return graph::Status();
    }
    if (spec.type == "float") {
      if (feature.float_list().value_size() != want) return count_error(feature.float_list().value_size());
      std::memcpy(out, feature.float_list().value().data(), static_cast<size_t>(want) * sizeof(float));
      return graph::Status();
    }
    if (feature.bytes_list().value_size() != 1) {
      return graph::invalid_argument(where + ": " + std::to_string(feature.bytes_list().value_size()) + " byte strings, not one");
    }
    const std::string& bytes = feature.bytes_list().value(0);
    if (spec.decode == "raw") {
      if (static_cast<int64_t>(bytes.size()) != want) return count_error(static_cast<int64_t>(bytes.size()));
      std::memcpy(out, bytes.data(), bytes.size());
      return graph::Status();
    }
    auto image = decode_image(std::as_bytes(std::span(bytes.data(), bytes.size())), spec.shape[2]);
    if (!image.ok()) return graph::invalid_argument(where + ": " + image.status().message());
    if (image->height != spec.shape[0] || image->width != spec.shape[1]) {
      return graph::invalid_argument(where + ": a " + std::to_string(image->height) + "x" + std::to_string(image->width) +
                                     " image, not " + std::to_string(spec.shape[0]) + "x" + std::to_string(spec.shape[1]));
    }
    std::memcpy(out, image->pixels.data(), image->pixels.size());
    return graph::Status();
  }

  std::string name_;
  std::vector<RecordFile> files_;
  std::vector<Record> records_;
  TfRecordOptions options_;
  std::vector<Field> fields_;
  std::vector<const TfFeature*> specs_;
};

graph::Status check_options(const TfRecordOptions& options) {
  if (options.features.empty()) return graph::invalid_argument("a TFRecord data set needs the features it reads");
  for (const auto& [name, spec] : options.features) {
    const std::string where = "TFRecord feature '" + name + "'";
    if (spec.type != "int64" && spec.type != "float" && spec.type != "bytes") {
      return graph::invalid_argument(where + ": type '" + spec.type + "' is not int64, float or bytes");
    }
    for (int64_t d : spec.shape) {
      if (d < 0) return graph::invalid_argument(where + ": a negative dim");
    }
    if (spec.decode != "raw" && spec.decode != "image") return graph::invalid_argument(where + ": decode '" + spec.decode + "' is not raw or image");
    if (spec.decode == "image" &&
        (spec.type != "bytes" || spec.shape.size() != 3 || (spec.shape[2] != 1 && spec.shape[2] != 3 && spec.shape[2] != 4))) {
      return graph::invalid_argument(where + ": an image is a bytes feature of shape [height, width, 1, 3 or 4 channels]");
    }
  }
  return graph::Status();
}

// The records of `file`, each header checked; with `check_data` their bytes too (corrupt ones counted
// in `skipped` and left out).
graph::Status index_records(const RecordFile& file, uint32_t file_index, bool check_data, std::vector<Record>& records,
                            int64_t& skipped) {
  const std::span<const std::byte> bytes = file.bytes;
  uint64_t offset = 0;
  for (int64_t number = 0; offset < bytes.size(); ++number) {
    const std::string where = file.name + ", record " + std::to_string(number) + " at byte " + std::to_string(offset);
    if (bytes.size() - offset < kHeaderBytes) return graph::invalid_argument(where + ": truncated in its header");
    const uint64_t length = read_u64(bytes.data() + offset);
    if (masked_crc32c(bytes.subspan(offset, 8)) != read_u32(bytes.data() + offset + 8)) {
      return graph::invalid_argument(where + ": corrupt (its length's CRC-32C does not match)");
    }
    if (length > bytes.size() - offset - kHeaderBytes || bytes.size() - offset - kHeaderBytes - length < kFooterBytes) {
      return graph::invalid_argument(where + ": truncated (it claims " + std::to_string(length) + " bytes)");
    }
    const Record record{.file = file_index, .offset = offset, .length = length, .number = number};
    offset += kHeaderBytes + length + kFooterBytes;
    if (check_data) {
      const std::span<const std::byte> data = bytes.subspan(record.offset + kHeaderBytes, length);
      if (masked_crc32c(data) != read_u32(data.data() + length)) {
        ++skipped;
        continue;
      }
    }
    records.push_back(record);
  }
  return graph::Status();
}

}  // namespace

uint32_t crc32c(std::span<const std::byte> bytes) {
  uint32_t crc = 0xffffffffu;
  // ISA-L's iSCSI CRC is CRC-32C without its final inversion; it takes int lengths.
  for (size_t done = 0; done < bytes.size();) {
    const size_t chunk = std::min<size_t>(bytes.size() - done, size_t{1} << 30);
    crc = crc32_iscsi(const_cast<unsigned char*>(reinterpret_cast<const unsigned char*>(bytes.data() + done)), static_cast<int>(chunk), crc);
    done += chunk;
  }
  return ~crc;
}

uint32_t masked_crc32c(std::span<const std::byte> bytes) {
  const uint32_t crc = crc32c(bytes);
  return ((crc >> 15) | (crc << 17)) + kMaskDelta;
}

graph::Expected<TfRecordSource> tfrecord_source(const std::vector<std::string>& paths, const TfRecordOptions& options) {
  if (paths.empty()) return graph::invalid_argument("a TFRecord data set needs at least one file");
  MIRRA_RETURN_IF_ERROR(check_options(options));
  std::vector<RecordFile> files;
  std::vector<Record> records;
  int64_t skipped = 0;
  for (const std::string& path : paths) {
    MIRRA_ASSIGN_OR_RETURN(std::shared_ptr<const MappedFile> mapped, MappedFile::open(path));
    RecordFile file{.name = "TFRecord file '" + path + "'", .bytes = mapped->bytes(), .owner = mapped};
    if (options.gzip) {
      MIRRA_ASSIGN_OR_RETURN(auto inflated, inflate_gzip(mapped->bytes(), file.name));
      file.bytes = std::span<const std::byte>(*inflated);
      file.owner = inflated;
    }
    MIRRA_RETURN_IF_ERROR(index_records(file, static_cast<uint32_t>(files.size()), options.skip_corrupt, records, skipped));
    files.push_back(std::move(file));
  }
  std::string name = paths.size() == 1 ? "TFRecord file '" + paths[0] + "'"
                                       : "TFRecord files '" + paths[0] + "' and " + std::to_string(paths.size() - 1) + " more";
  auto source = std::make_shared<TfRecords>(std::move(name), std::move(files), std::move(records), options);
  return TfRecordSource{.source = std::move(source), .skipped = skipped};
}

}  // namespace mirra::runtime::data
