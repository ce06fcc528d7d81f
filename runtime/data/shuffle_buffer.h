// ShuffledRecords: a stream's records in the order an epoch visits them (tf.data's shuffle of a
// stream): its files (all, or a worker's) in an order drawn from (seed, epoch), their records passed
// through a buffer from
// which each next one is drawn at random, by a generator also seeded by (seed, epoch). The buffer
// fills up to a number of records and of bytes, whichever comes first (always one record), so large
// records do not fill memory. A record thus leaves at most `records` places before it entered; a
// buffer as large as the data set is a full permutation. Without shuffling, the files' records in
// order.
//
//   auto records = ShuffledRecords::open(stream, {0, 1, 2}, {.seed = 7, .epoch = 2}, {.records = 10'000}, true);
//   StreamRecord record;
//   while (*records->next(record)) ...
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "graph/status.h"
#include "runtime/data/stream_source.h"
#include "runtime/random.h"

namespace mirra::runtime::data {

struct ShuffleBufferSize {
  size_t records = 10'000;
  size_t bytes = size_t{256} << 20;
};

class ShuffledRecords {
 public:
  // The records of `files` (indices into the stream's files).
  static graph::Expected<ShuffledRecords> open(const StreamSource& stream, std::vector<int64_t> files, const Draw& draw,
                                               ShuffleBufferSize buffer, bool shuffle);

  // The next record into `record` (true), or false after the last.
  graph::Expected<bool> next(StreamRecord& record);
  // Passes over the next `count` records (false: the stream ended first).
  graph::Expected<bool> skip(int64_t count);

 private:
  ShuffledRecords(std::unique_ptr<RecordReader> reader, ShuffleBufferSize capacity, uint64_t seed)
      : reader_(std::move(reader)), capacity_(capacity), rng_(seed) {}

  std::unique_ptr<RecordReader> reader_;
  ShuffleBufferSize capacity_;  // 0 records: no shuffling
  Random rng_;
  std::vector<StreamRecord> buffer_;
  size_t buffered_bytes_ = 0;
  bool input_ended_ = false;
};

}  // namespace mirra::runtime::data
