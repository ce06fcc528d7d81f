// StreamSource: a data set whose records can only be read in order, each after the ones before it
// (GZIP-compressed files: no byte of one is reached without inflating those before it). It reads no
// example at random; instead it opens passes over its files in an order, handing out each record's
// bytes with where it lies, and decodes a record into the fields on any thread. The Dataset shuffles
// its records through a seeded buffer (runtime/data/shuffle_buffer.h). Memory holds what a pass reads
// ahead, not the data set, so one larger than memory streams.
//
//   auto pass = (*stream)->open({1, 0});        // file 1, then file 0
//   StreamRecord record;
//   while (*(*pass)->next(record)) (*stream)->decode(record, out);
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "graph/status.h"
#include "runtime/data/example_source.h"

namespace mirra::runtime::data {

// One record of a stream: its bytes, and where it lies, for errors.
struct StreamRecord {
  std::vector<std::byte> bytes;
  int64_t file = 0;    // the index of its file in the source
  int64_t number = 0;  // in its file, from 0
  uint64_t offset = 0; // of its first byte in its file (inflated)
};

// A pass over some of a stream's files, record after record.
class RecordReader {
 public:
  virtual ~RecordReader() = default;
  // The next record into `record` (true), or false after the last; an error names the file, the record
  // and its offset.
  virtual graph::Expected<bool> next(StreamRecord& record) = 0;
};

class StreamSource : public ExampleSource {
 public:
  virtual int64_t file_count() const = 0;
  // The records of file f (counted when the source opened).
  virtual int64_t file_size(int64_t f) const = 0;
  // A pass over the files `files` (indices into the source's files), each read whole, in that order.
  virtual graph::Expected<std::unique_ptr<RecordReader>> open(std::vector<int64_t> files) const = 0;
  // Copies the record's value of each field f whose out[f] is not null into out[f]
  // (fields()[f].bytes() bytes). Called from any thread.
  virtual graph::Status decode(const StreamRecord& record, std::span<std::byte* const> out) const = 0;

  // A stream reads no example at random.
  graph::Status read(int64_t index, const Draw& draw, std::span<std::byte* const> out) const final;
  const StreamSource* stream() const final { return this; }
};

}  // namespace mirra::runtime::data
