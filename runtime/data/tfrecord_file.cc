// TFRecord: uncompressed files mapped, their records indexed and checked, and read at random; GZIP
// files handed to the stream.
#include "runtime/data/tfrecord_file.h"

#include "runtime/data/mapped_file.h"
#include "runtime/data/tfrecord_stream.h"

namespace mirra::runtime::data {

namespace {

struct RecordFile {
  std::string name;  // "TFRecord file 'x'"
  std::shared_ptr<const MappedFile> mapped;
};

struct Record {
  uint32_t file = 0;
  uint64_t offset = 0;  // of its header
  uint64_t length = 0;
  int64_t number = 0;   // in its file, from 0
};

std::string record_name(const RecordFile& file, int64_t number, uint64_t offset) {
  return file.name + ", record " + std::to_string(number) + " at byte " + std::to_string(offset);
}

class TfRecords final : public ExampleSource {
 public:
  TfRecords(std::string name, std::vector<RecordFile> files, std::vector<Record> records, const TfRecordOptions& options)
      : name_(std::move(name)), files_(std::move(files)), records_(std::move(records)), decoder_(options.features) {}

  const std::string& name() const override { return name_; }
  const std::vector<Field>& fields() const override { return decoder_.fields(); }
  int64_t size() const override { return static_cast<int64_t>(records_.size()); }

  graph::Status read(int64_t index, const Draw& /*draw*/, std::span<std::byte* const> out) const override {
    if (index < 0 || index >= size()) {
      return graph::invalid_argument(name_ + ": example " + std::to_string(index) + " does not exist");
    }
    const Record& record = records_[static_cast<size_t>(index)];
    const RecordFile& file = files_[record.file];
    const auto where = [&] { return record_name(file, record.number, record.offset); };
    const std::span<const std::byte> data = file.mapped->bytes().subspan(record.offset + kTfRecordHeaderBytes, record.length);
    if (!tfrecord_data_intact(data, file.mapped->bytes().subspan(record.offset + kTfRecordHeaderBytes + record.length).first<kTfRecordFooterBytes>())) {
      return graph::invalid_argument(where() + ": corrupt (its data's CRC-32C does not match)");
    }
    return decoder_.decode(data, where, out);
  }

 private:
  std::string name_;
  std::vector<RecordFile> files_;
  std::vector<Record> records_;
  TfExampleDecoder decoder_;
};

// The records of `file`, each header checked; with `check_data` their bytes too (corrupt ones counted
// in `skipped` and left out).
graph::Status index_records(const RecordFile& file, uint32_t file_index, bool check_data, std::vector<Record>& records,
                            int64_t& skipped) {
  const std::span<const std::byte> bytes = file.mapped->bytes();
  uint64_t offset = 0;
  for (int64_t number = 0; offset < bytes.size(); ++number) {
    const std::string where = record_name(file, number, offset);
    if (bytes.size() - offset < kTfRecordHeaderBytes) return graph::invalid_argument(where + ": truncated in its header");
    MIRRA_ASSIGN_OR_RETURN(const uint64_t length, tfrecord_length(bytes.subspan(offset).first<kTfRecordHeaderBytes>(), where));
    if (length > bytes.size() - offset - kTfRecordHeaderBytes || bytes.size() - offset - kTfRecordHeaderBytes - length < kTfRecordFooterBytes) {
      return graph::invalid_argument(where + ": truncated (it claims " + std::to_string(length) + " bytes)");
    }
    const Record record{.file = file_index, .offset = offset, .length = length, .number = number};
    offset += kTfRecordHeaderBytes + length + kTfRecordFooterBytes;
    if (check_data) {
      const std::span<const std::byte> data = bytes.subspan(record.offset + kTfRecordHeaderBytes, length);
      if (!tfrecord_data_intact(data, bytes.subspan(record.offset + kTfRecordHeaderBytes + length).first<kTfRecordFooterBytes>())) {
        ++skipped;
        continue;
      }
    }
    records.push_back(record);
  }
  return graph::Status();
}

}  // namespace

graph::Expected<TfRecordSource> tfrecord_source(const std::vector<std::string>& paths, const TfRecordOptions& options) {
  if (paths.empty()) return graph::invalid_argument("a TFRecord data set needs at least one file");
  MIRRA_RETURN_IF_ERROR(check_tf_features(options.features));
  std::string name = paths.size() == 1 ? "TFRecord file '" + paths[0] + "'"
                                       : "TFRecord files '" + paths[0] + "' and " + std::to_string(paths.size() - 1) + " more";
  if (options.gzip) return gzip_tfrecord_stream(paths, options, std::move(name));
  std::vector<RecordFile> files;
  std::vector<Record> records;
  int64_t skipped = 0;
  for (const std::string& path : paths) {
    MIRRA_ASSIGN_OR_RETURN(std::shared_ptr<const MappedFile> mapped, MappedFile::open(path));
    const RecordFile file{.name = "TFRecord file '" + path + "'", .mapped = std::move(mapped)};
    MIRRA_RETURN_IF_ERROR(index_records(file, static_cast<uint32_t>(files.size()), options.skip_corrupt, records, skipped));
    files.push_back(file);
  }
  auto source = std::make_shared<TfRecords>(std::move(name), std::move(files), std::move(records), options);
  return TfRecordSource{.source = std::move(source), .skipped = skipped};
}

}  // namespace mirra::runtime::data
