// GZIP TFRecord streams: records framed over a GzipReader, the counting pass that opens the data set,
// and the passes the Dataset reads.
#include "runtime/data/tfrecord_stream.h"

#include <array>
#include <memory>
#include <numeric>

#include "runtime/data/gzip_reader.h"
#include "runtime/data/stream_source.h"
#include "runtime/data/tfrecord_example.h"
#include "runtime/data/tfrecord_framing.h"

namespace mirra::runtime::data {

namespace {

// Bytes a record's buffer grows by while it is read, so a length a damaged header claims is not
// allocated before its bytes are there.
constexpr uint64_t kGrowthBytes = uint64_t{16} << 20;

std::string file_name(const std::string& path) { return "TFRecord file '" + path + "'"; }

std::string record_name(const std::string& path, int64_t number, uint64_t offset) {
  return file_name(path) + ", record " + std::to_string(number) + " at byte " + std::to_string(offset);
}

// The records of one GZIP TFRecord file, one after another.
class RecordFile {
 public:
  static graph::Expected<RecordFile> open(const std::string& path, int64_t file) {
    MIRRA_ASSIGN_OR_RETURN(auto reader, GzipReader::open(path, file_name(path)));
    return RecordFile(path, file, std::move(reader));
  }

  // The next record into `record` (false after the last), and whether its data matches its CRC.
  graph::Expected<bool> next(StreamRecord& record, bool& intact) {
    const uint64_t offset = reader_->position();
    const auto where = [&] { return record_name(path_, number_, offset); };
    std::array<std::byte, kTfRecordHeaderBytes> header;
    MIRRA_ASSIGN_OR_RETURN(const size_t got, reader_->read(header));
    if (got == 0) return false;
    if (got < header.size()) return graph::invalid_argument(where() + ": truncated in its header");
    MIRRA_ASSIGN_OR_RETURN(const uint64_t length, tfrecord_length(header, where()));
    const auto truncated = [&] { return graph::invalid_argument(where() + ": truncated (it claims " + std::to_string(length) + " bytes)"); };
    record.bytes.clear();
    while (record.bytes.size() < length) {
      const size_t had = record.bytes.size();
      const size_t chunk = static_cast<size_t>(std::min(length - had, kGrowthBytes));
      record.bytes.resize(had + chunk);
      MIRRA_ASSIGN_OR_RETURN(const size_t read, reader_->read(std::span(record.bytes).subspan(had)));
      if (read < chunk) return truncated();
    }
    std::array<std::byte, kTfRecordFooterBytes> footer;
    MIRRA_ASSIGN_OR_RETURN(const size_t footer_bytes, reader_->read(footer));
    if (footer_bytes < footer.size()) return truncated();
    intact = tfrecord_data_intact(record.bytes, footer);
    record.file = file_;
    record.number = number_++;
    record.offset = offset;
    return true;
  }

 private:
  RecordFile(std::string path, int64_t file, std::unique_ptr<GzipReader> reader)
      : path_(std::move(path)), file_(file), reader_(std::move(reader)) {}

  std::string path_;
  int64_t file_;
  std::unique_ptr<GzipReader> reader_;
  int64_t number_ = 0;
};

// A pass over some files' records, corrupt ones left out or refused.
class Pass final : public RecordReader {
 public:
  Pass(const std::vector<std::string>& paths, std::vector<int64_t> files, bool skip_corrupt)
      : paths_(paths), files_(std::move(files)), skip_corrupt_(skip_corrupt) {}

  graph::Expected<bool> next(StreamRecord& record) override {
    while (true) {
      if (!current_) {
        if (next_file_ == files_.size()) return false;
        const int64_t file = files_[next_file_++];
        MIRRA_ASSIGN_OR_RETURN(RecordFile opened, RecordFile::open(paths_[static_cast<size_t>(file)], file));
        current_ = std::make_unique<RecordFile>(std::move(opened));
      }
      bool intact = true;
      MIRRA_ASSIGN_OR_RETURN(const bool more, current_->next(record, intact));
      if (!more) {
        current_.reset();
        continue;
      }
      if (intact) return true;
      if (!skip_corrupt_) {
        return graph::invalid_argument(record_name(paths_[static_cast<size_t>(record.file)], record.number, record.offset) +
                                       ": corrupt (its data's CRC-32C does not match)");
      }
    }
  }

 private:
  std::vector<std::string> paths_;
  std::vector<int64_t> files_;
  bool skip_corrupt_;
  size_t next_file_ = 0;
  std::unique_ptr<RecordFile> current_;
};

class GzipTfRecords final : public StreamSource {
 public:
  GzipTfRecords(std::string name, std::vector<std::string> paths, std::vector<int64_t> file_sizes, TfRecordOptions options)
      : name_(std::move(name)),
        paths_(std::move(paths)),
        file_sizes_(std::move(file_sizes)),
        size_(std::accumulate(file_sizes_.begin(), file_sizes_.end(), int64_t{0})),
        options_(options),
        decoder_(options.features) {}

  const std::string& name() const override { return name_; }
  const std::vector<Field>& fields() const override { return decoder_.fields(); }
  int64_t size() const override { return size_; }
  int64_t file_count() const override { return static_cast<int64_t>(paths_.size()); }
  int64_t file_size(int64_t f) const override { return file_sizes_.at(static_cast<size_t>(f)); }

  graph::Expected<std::unique_ptr<RecordReader>> open(std::vector<int64_t> files) const override {
    for (int64_t f : files) {
      if (f < 0 || f >= file_count()) return graph::invalid_argument(name_ + " has no file " + std::to_string(f));
    }
    return std::unique_ptr<RecordReader>(std::make_unique<Pass>(paths_, std::move(files), options_.skip_corrupt));
  }

  graph::Status decode(const StreamRecord& record, std::span<std::byte* const> out) const override {
    return decoder_.decode(record.bytes, [&] { return record_name(paths_.at(static_cast<size_t>(record.file)), record.number, record.offset); },
                           out);
  }

 private:
  std::string name_;
  std::vector<std::string> paths_;
  std::vector<int64_t> file_sizes_;  // records, per file
  int64_t size_;
  TfRecordOptions options_;
  TfExampleDecoder decoder_;
};

}  // namespace

graph::Expected<TfRecordSource> gzip_tfrecord_stream(const std::vector<std::string>& paths, const TfRecordOptions& options,
                                                     std::string name) {
  std::vector<int64_t> file_sizes(paths.size(), 0);
  int64_t skipped = 0;
  StreamRecord record;
  for (size_t f = 0; f < paths.size(); ++f) {
    MIRRA_ASSIGN_OR_RETURN(RecordFile file, RecordFile::open(paths[f], static_cast<int64_t>(f)));
    bool intact = true;
    while (true) {
      MIRRA_ASSIGN_OR_RETURN(const bool more, file.next(record, intact));
      if (!more) break;
      if (intact) {
        ++file_sizes[f];
      } else if (options.skip_corrupt) {
        ++skipped;
      } else {
        return graph::invalid_argument(record_name(paths[f], record.number, record.offset) +
                                       ": corrupt (its data's CRC-32C does not match)");
      }
    }
  }
  auto source = std::make_shared<GzipTfRecords>(std::move(name), paths, std::move(file_sizes), options);
  return TfRecordSource{.source = std::move(source), .skipped = skipped};
}

}  // namespace mirra::runtime::data
