// ShuffledRecords: the epoch's file order, and the buffer that draws each next record at random.
#include "runtime/data/shuffle_buffer.h"

#include <utility>

namespace mirra::runtime::data {

graph::Expected<ShuffledRecords> ShuffledRecords::open(const StreamSource& stream, std::vector<int64_t> files, const Draw& draw,
                                                       ShuffleBufferSize buffer, bool shuffle) {
  if (shuffle && buffer.records == 0) return graph::invalid_argument(stream.name() + ": a shuffle buffer holds at least one record");
  const uint64_t seed = Random::mix(draw.seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(draw.epoch) + 1);
  if (shuffle) {
    Random rng(seed);
    for (size_t i = files.size(); i > 1; --i) std::swap(files[i - 1], files[rng.below(i)]);
  }
  MIRRA_ASSIGN_OR_RETURN(std::unique_ptr<RecordReader> reader, stream.open(std::move(files)));
  if (!shuffle) buffer.records = 0;
  return ShuffledRecords(std::move(reader), buffer, Random::mix(seed));
}

graph::Expected<bool> ShuffledRecords::next(StreamRecord& record) {
  if (capacity_.records == 0) return reader_->next(record);
  while (!input_ended_ && buffer_.size() < capacity_.records && (buffer_.empty() || buffered_bytes_ < capacity_.bytes)) {
    StreamRecord entering;
    MIRRA_ASSIGN_OR_RETURN(const bool more, reader_->next(entering));
    if (more) {
      buffered_bytes_ += entering.bytes.size();
      buffer_.push_back(std::move(entering));
    } else {
      input_ended_ = true;
    }
  }
  if (buffer_.empty()) return false;
  StreamRecord& drawn = buffer_[rng_.below(buffer_.size())];
  buffered_bytes_ -= drawn.bytes.size();
  std::swap(record, drawn);
  std::swap(drawn, buffer_.back());
  buffer_.pop_back();
  return true;
}

graph::Expected<bool> ShuffledRecords::skip(int64_t count) {
  StreamRecord passed;
  for (int64_t i = 0; i < count; ++i) {
    MIRRA_ASSIGN_OR_RETURN(const bool more, next(passed));
    if (!more) return false;
  }
  return true;
}

}  // namespace mirra::runtime::data
