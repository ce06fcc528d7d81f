// Dataset: the input pipeline over an ExampleSource: batches of named tensors, one per placeholder the
// data feeds (Feed: which field, converted and shaped as the placeholder takes it, normalised,
// one-hot encoded, images augmented). Each epoch visits the examples in an order drawn from (seed,
// epoch), so a run is reproducible and every epoch differs: a permutation of all of them where the
// source reads at random, and for a stream (runtime/data/stream_source.h) its files shuffled and its
// records drawn through a shuffle buffer. The batch is the global batch, of which a worker takes its
// shard (of a stream, every worker reads every record and decodes only its own); a partial last batch
// is kept or dropped. Batches are assembled `prefetch` ahead on a background thread, their examples
// spread over `threads` threads, so the training step does not wait for them.
//
//   auto data = Dataset::create(source, {{.placeholder = "images", .field = "image", .dtype = DType::f32,
//                                         .shape = {28, 28, 1}, .scale = {1 / 255.0}},
//                                        {.placeholder = "labels", .field = "label", .dtype = DType::i64}},
//                               {.batch_size = 128, .seed = 7});
//   auto epoch = data->epoch(0);
//   while (auto batch = epoch.next()) session.run(batch->feeds(), ...);
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "graph/dtype.h"
#include "runtime/data/example_source.h"
#include "runtime/data/image_augmentation.h"
#include "runtime/data/stream_source.h"
#include "runtime/data/value_conversion.h"
#include "runtime/session.h"
#include "runtime/tensor.h"

namespace mirra::runtime::data {

class ShuffledRecords;  // runtime/data/shuffle_buffer.h

// How one placeholder is fed from a field of the source.
struct Feed {
  std::string placeholder;
  std::string field;
  graph::DType dtype = graph::DType::f32;  // the placeholder's
  // The placeholder's shape of one example: the field's values in order, as many of them (with
  // one_hot, the field's values times one_hot). Empty: the field's own shape (and [one_hot] after it).
  std::vector<int64_t> shape;
  // Normalisation into a floating placeholder, value * scale[c] + shift[c] (c the channel: the index
  // along the last dim of `shape`; one entry applies to all): (v / 255 - mean) / stddev is
  // scale = 1 / (255 * stddev), shift = -mean / stddev. Empty: the values as they are.
  std::vector<double> scale, shift;
  int64_t one_hot = 0;  // > 0: an integer field becomes a one-hot encoding of this many classes
  // Random crop and flip of u8 images shaped (height, width[, channels]), before the conversion.
  ImageAugmentation augmentation;
};

// How the workers of a multi-worker run divide the data (TensorFlow's AutoShardPolicy).
enum class ShardPolicy {
  // Every worker takes its share of every global batch, so W workers compute what one device computes.
  // A worker reads only its own examples of a source read at random; of a stream, it reads every
  // record and decodes its own.
  example,
  // A stream's files dealt to the workers (file f to worker f mod W), each reading only its own: less
  // to inflate, but a batch mixes other examples than one device's would, and an epoch ends when the
  // worker with the fewest examples has no full share of a batch left. Streams only.
  file,
  // file for a stream of at least as many files as workers, else example (TensorFlow's AUTO).
  automatic,
};

struct BatchingOptions {
  int64_t batch_size = 128;
  bool shuffle = true;
  uint64_t seed = 0;
  bool drop_remainder = false;  // drop a last batch smaller than batch_size
  int prefetch = 2;             // batches prepared ahead on a background thread; 0: on the caller's thread
  int threads = 1;              // threads that assemble one batch's examples (reading, decoding, converting)
  // What a stream's shuffle draws from: at most this many records, and no more bytes than
  // shuffle_buffer_bytes (one record at least).
  int64_t shuffle_buffer = 10'000;
  int64_t shuffle_buffer_bytes = int64_t{256} << 20;
  // Shard `shard` of `shards` (a worker of a multi-worker run): its share of every global batch, by
  // TensorFlow's split rule (shares differ by at most one; the first batch mod shards are larger).
  int64_t shard = 0, shards = 1;
  ShardPolicy shard_policy = ShardPolicy::example;
  // When not empty, each batch also feeds this placeholder (i64 [batch]) every example's key: its
  // epoch and its position in the epoch's order of the global batches, epoch * 2^40 + position, so
  // that whatever is drawn per example (dropout masks, ops/dropout_ops.h) does not depend on the batch
  // size, the replicas or the workers, and a resumed run draws what the unbroken run drew. Sharded by
  // file, where the workers' examples have no global order, the position is the worker's own times
  // the shard count plus the shard.
  std::string example_keys;
};

struct Batch {
  std::vector<std::pair<std::string, Tensor>> tensors;  // by placeholder, in the order of the feeds
  int64_t size = 0;
  int64_t global_size = 0;  // of the global batch this is a shard of (size, unsharded)

  // The tensor fed to `placeholder` (which must be one of the feeds).
  const Tensor& operator[](std::string_view placeholder) const;
  Feeds feeds() const;
};

class Dataset {
 public:
  class Epoch;

  // Refuses feeds that name no field of the source or one placeholder twice, conversions that cannot
  // be made (check_conversion), shapes that do not hold the field's values, bad options, and sharding
  // by file where the source is no stream, has fewer files than shards, or a shard's files hold less
  // than its share of one batch.
  static graph::Expected<Dataset> create(std::shared_ptr<const ExampleSource> source, std::vector<Feed> feeds,
                                         BatchingOptions options);

  int64_t size() const { return source_->size(); }
  // The files of a stream this shard reads alone (ShardPolicy::file), or empty: it reads them all.
  const std::vector<int64_t>& shard_files() const { return shard_files_; }
  int64_t batches_per_epoch() const;
  const BatchingOptions& options() const { return options_; }
  const ExampleSource& source() const { return *source_; }
  const std::vector<Feed>& feeds() const { return feeds_; }
  // The placeholders the batches feed, in order (the example keys' last).
  std::vector<std::string> placeholders() const;
  // This data set shuffled from another seed (a resumed run continues its checkpoint's order).
  Dataset reseeded(uint64_t seed) const;

  // The batches of epoch `epoch` (0-based) from batch `first_batch` on (to resume mid-epoch); the
  // Dataset must outlive it.
  Epoch epoch(int64_t epoch, int64_t first_batch = 0) const;
  // The order in which epoch `epoch` visits the examples of a source read at random.
  std::vector<int64_t> order(int64_t epoch) const;

 private:
  struct Plan;  // what each feed reads and converts, fixed when the Dataset is made

  Dataset() = default;
  // The examples this shard takes of global batch b: [first, first + count) of the epoch's order.
  struct Share {
    int64_t global = 0, skipped = 0, count = 0;
  };
  Share share_of(int64_t b) const;
  // Batch b of epoch `epoch`, visiting `order`: this shard's rows of it.
  graph::Expected<Batch> batch_at(const std::vector<int64_t>& order, int64_t epoch, int64_t b) const;
  // Batch b of a stream's epoch, its records the next ones `records` gives.
  graph::Expected<Batch> stream_batch_at(ShuffledRecords& records, int64_t epoch, int64_t b) const;
  // The batch of `examples` (for a stream, the epoch's positions of `records`).
  graph::Expected<Batch> assemble(std::span<const int64_t> examples, int64_t epoch,
                                  const std::vector<StreamRecord>* records = nullptr) const;
  // Adds options_.example_keys's tensor to `batch`, its example i at position first + i * stride.
  void add_example_keys(Batch& batch, int64_t epoch, int64_t first, int64_t stride) const;

  std::shared_ptr<const ExampleSource> source_;
  std::vector<Feed> feeds_;
  std::shared_ptr<const Plan> plan_;
  BatchingOptions options_;
  std::vector<int64_t> shard_files_;
  int64_t file_sharded_batches_ = 0;  // per epoch, with shard_files_
};

class Dataset::Epoch {
 public:
  Epoch(const Dataset& dataset, int64_t epoch, int64_t first_batch);
  Epoch(Epoch&&) = delete;
  ~Epoch();

  // The next batch, nullopt after the last, or an error naming the data set and the example that
  // could not be read or converted.
  graph::Expected<std::optional<Batch>> next();

 private:
  void produce();
  graph::Expected<Batch> batch(int64_t b);

  const Dataset& dataset_;
  const int64_t epoch_;
  const std::vector<int64_t> order_;        // of a source read at random
  std::unique_ptr<ShuffledRecords> records_;  // of a stream, opened at its first batch
  const int64_t batches_;
  int64_t next_batch_ = 0;  // taken by next() (synchronous mode) or by the producer

  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<graph::Expected<Batch>> ready_;
  bool stopping_ = false;
  std::thread producer_;
};

}  // namespace mirra::runtime::data
