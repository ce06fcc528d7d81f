// Dataset: labelled examples held in memory as bytes (IDX images), served as batches of normalised
// f32 features and i64 labels. Each epoch is shuffled from (seed, epoch), so a run is reproducible and
// every epoch differs; the batch is the global batch; a partial last batch is kept or dropped. Images
// may be augmented (random crop after padding, flip; image_augmentation.h), each example from (seed,
// epoch, its index). Batches are assembled `prefetch` ahead on a background thread, so the training
// step never waits on the conversion.
//
//   auto data = Dataset::create(train.images, train.labels, {28, 28, 1}, {.batch_size = 128, .seed = 7});
//   auto epoch = data->epoch(0);
//   while (auto batch = epoch.next()) session.run({{"images", batch->features}, {"labels", batch->labels}}, ...);
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "runtime/data/idx_file.h"
#include "runtime/data/image_augmentation.h"
#include "runtime/tensor.h"

namespace mirra::runtime::data {

// feature = (byte * scale - mean) / stddev
struct Normalization {
  double scale = 1.0 / 255.0;
  double mean = 0.0;
  double stddev = 1.0;
};

struct BatchingOptions {
  int64_t batch_size = 128;
  bool shuffle = true;
  uint64_t seed = 0;
  bool drop_remainder = false;  // drop a last batch smaller than batch_size
  int prefetch = 2;             // batches prepared ahead on a background thread; 0: on the caller's thread
  // Shard `shard` of `shards` (a worker of a multi-worker run): its share of every global batch, by
  // TensorFlow's split rule (shares differ by at most one; the first batch mod shards are larger).
  int64_t shard = 0, shards = 1;
  Normalization normalization;
  // Of examples shaped (height, width[, channels]); the bytes are augmented, then normalised.
  ImageAugmentation augmentation;
};

struct Batch {
  Tensor features;  // f32 [size, example_shape...]
  Tensor labels;    // i64 [size]
  int64_t size = 0;
  int64_t global_size = 0;  // of the global batch this is a shard of (size, unsharded)
};

class Dataset {
 public:
  class Epoch;

  // `examples` holds u8 [n, ...] with example_shape's element count per example; `labels` u8 [n].
  static graph::Expected<Dataset> create(const IdxArray& examples, const IdxArray& labels,
                                         std::vector<int64_t> example_shape, BatchingOptions options);

  int64_t size() const { return static_cast<int64_t>(labels_.size()); }
  int64_t batches_per_epoch() const;
  const BatchingOptions& options() const { return options_; }

  // The batches of epoch `epoch` (0-based) from batch `first_batch` on (to resume mid-epoch); the
  // Dataset must outlive it.
  Epoch epoch(int64_t epoch, int64_t first_batch = 0) const;
  // The order in which epoch `epoch` visits the examples.
  std::vector<int64_t> order(int64_t epoch) const;

 private:
  Dataset() = default;
  // Batch b of epoch `epoch`, visiting `order`: this shard's rows of it.
  Batch batch_at(const std::vector<int64_t>& order, int64_t epoch, int64_t b) const;
  Batch assemble(const std::vector<int64_t>& order, int64_t epoch, int64_t first, int64_t count) const;

  std::shared_ptr<const std::vector<uint8_t>> bytes_;  // n * example_size
  std::vector<int64_t> labels_;
  std::vector<int64_t> example_shape_;
  int64_t example_size_ = 0;
  BatchingOptions options_;
};

class Dataset::Epoch {
 public:
  Epoch(const Dataset& dataset, int64_t epoch, int64_t first_batch);
  Epoch(Epoch&&) = delete;
  ~Epoch();

  // The next batch, or nullopt after the last.
  std::optional<Batch> next();

 private:
  void produce();

  const Dataset& dataset_;
  const int64_t epoch_;
  const std::vector<int64_t> order_;
  const int64_t batches_;
  int64_t next_batch_ = 0;  // taken by next() (synchronous mode) or by the producer

  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Batch> ready_;
  bool stopping_ = false;
  std::thread producer_;
};

}  // namespace mirra::runtime::data
