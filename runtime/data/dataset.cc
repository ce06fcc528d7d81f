// Dataset: validation, per-epoch shuffled order, batch assembly and the prefetching producer.
#include "runtime/data/dataset.h"

#include <algorithm>
#include <numeric>
#include <string>

#include "runtime/allocator.h"
#include "runtime/collectives/collective.h"
#include "runtime/random.h"
#include "runtime/vector_clones.h"

namespace mirra::runtime::data {

namespace {

// An example's bytes as normalised floats, vectorised (this file is compiled at -O3) for the CPU's
// widest vectors. The producer thread assembles each batch beside the training step, whose threads
// it takes a core from: with the next example's bytes prefetched, a batch of 128 Fashion-MNIST images
// takes 30 us instead of 150.
MIRRA_VECTOR_CLONES void normalize_bytes(const uint8_t* bytes, float* out, int64_t n, float scale, float shift) {
  for (int64_t j = 0; j < n; ++j) out[j] = static_cast<float>(bytes[j]) * scale + shift;
}

constexpr int64_t kCacheLine = 64;

}  // namespace

graph::Expected<Dataset> Dataset::create(const IdxArray& examples, const IdxArray& labels,
                                         std::vector<int64_t> example_shape, BatchingOptions options) {
  if (options.batch_size <= 0) return graph::invalid_argument("batch size must be positive");
  if (options.prefetch < 0) return graph::invalid_argument("prefetch must not be negative");
  if (options.shards < 1 || options.shard < 0 || options.shard >= options.shards) {
    return graph::invalid_argument("shard " + std::to_string(options.shard) + " of " + std::to_string(options.shards) +
                                   " does not exist");
  }
  if (!(options.normalization.stddev > 0)) return graph::invalid_argument("normalisation stddev must be positive");
  MIRRA_RETURN_IF_ERROR(check_augmentation(options.augmentation));
  if (options.augmentation.enabled() && example_shape.size() != 2 && example_shape.size() != 3) {
    return graph::invalid_argument("image augmentation needs examples shaped (height, width[, channels]), not rank " +
                                   std::to_string(example_shape.size()));
  }
  if (labels.dims.size() != 1) return graph::invalid_argument("labels must be a vector");
  if (examples.dims.empty() || examples.dims[0] != labels.dims[0]) {
    return graph::invalid_argument("examples and labels disagree on the number of examples");
  }
  int64_t example_size = 1;
  for (int64_t d : example_shape) {
    if (d <= 0) return graph::invalid_argument("example dims must be positive");
    example_size *= d;
  }
  const int64_t n = labels.dims[0];
  if (static_cast<int64_t>(examples.values.size()) != n * example_size) {
    return graph::invalid_argument("examples hold " + std::to_string(examples.values.size()) + " bytes, not " +
                                   std::to_string(n) + " x " + std::to_string(example_size));
  }
  Dataset dataset;
  dataset.bytes_ = std::make_shared<const std::vector<uint8_t>>(examples.values);
  dataset.labels_.assign(labels.values.begin(), labels.values.end());
  dataset.example_shape_ = std::move(example_shape);
  dataset.example_size_ = example_size;
  dataset.options_ = options;
  return dataset;
}

int64_t Dataset::batches_per_epoch() const {
  const int64_t full = size() / options_.batch_size;
  return options_.drop_remainder || size() % options_.batch_size == 0 ? full : full + 1;
}

std::vector<int64_t> Dataset::order(int64_t epoch) const {
  std::vector<int64_t> order(static_cast<size_t>(size()));
  std::iota(order.begin(), order.end(), int64_t{0});
  if (options_.shuffle) {
    // Fisher-Yates from a generator seeded by (seed, epoch).
    Random rng(options_.seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(epoch) + 1);
    for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng.below(i)]);
  }
  return order;
}

Batch Dataset::batch_at(const std::vector<int64_t>& order, int64_t epoch, int64_t b) const {
  const int64_t first = b * options_.batch_size;
  const int64_t global = std::min(options_.batch_size, size() - first);
  int64_t skipped = 0;
  for (int64_t w = 0; w < options_.shard; ++w) skipped += participant_share(global, options_.shards, w);
  Batch batch = assemble(order, epoch, first + skipped, participant_share(global, options_.shards, options_.shard));
  batch.global_size = global;
  return batch;
}

Batch Dataset::assemble(const std::vector<int64_t>& order, int64_t epoch, int64_t first, int64_t count) const {
  std::vector<int64_t> dims = {count};
  dims.insert(dims.end(), example_shape_.begin(), example_shape_.end());
  const TensorShape shape(dims);
  Batch batch{Tensor::empty(host_allocator(), graph::DType::f32, shape),
              Tensor::empty(host_allocator(), graph::DType::i64, TensorShape{count}), count, count};
  const Normalization& norm = options_.normalization;
  const float scale = static_cast<float>(norm.scale / norm.stddev), shift = static_cast<float>(-norm.mean / norm.stddev);
  float* features = batch.features.mutable_data<float>();
  int64_t* labels = batch.labels.mutable_data<int64_t>();
  const auto example_at = [&](int64_t i) { return order[static_cast<size_t>(first + i)]; };
  const ImageAugmentation& augmentation = options_.augmentation;
  const ImageShape image{example_shape_.empty() ? 0 : example_shape_[0], example_shape_.size() < 2 ? 0 : example_shape_[1],
                         example_shape_.size() == 3 ? example_shape_[2] : 1};
  std::vector<uint8_t> augmented(augmentation.enabled() ? static_cast<size_t>(example_size_) : 0);
  for (int64_t i = 0; i < count; ++i) {
    const int64_t example = example_at(i);
    // The examples are scattered over the data set: fetch the next one's bytes while this one converts.
    if (i + 1 < count) {
      const uint8_t* next = bytes_->data() + example_at(i + 1) * example_size_;
      for (int64_t line = 0; line < example_size_; line += kCacheLine) __builtin_prefetch(next + line);
    }
    const uint8_t* bytes = bytes_->data() + example * example_size_;
    if (augmentation.enabled()) {
      augment_image(bytes, augmented.data(), image, augmentation, {.seed = options_.seed, .epoch = epoch, .example = example});
      bytes = augmented.data();
    }
    normalize_bytes(bytes, features + i * example_size_, example_size_, scale, shift);
    labels[i] = labels_[static_cast<size_t>(example)];
  }
  return batch;
}

Dataset::Epoch Dataset::epoch(int64_t epoch, int64_t first_batch) const { return Epoch(*this, epoch, first_batch); }

Dataset::Epoch::Epoch(const Dataset& dataset, int64_t epoch, int64_t first_batch)
    : dataset_(dataset),
      epoch_(epoch),
      order_(dataset.order(epoch)),
      batches_(dataset.batches_per_epoch()),
      next_batch_(std::clamp<int64_t>(first_batch, 0, batches_)) {
  if (dataset_.options_.prefetch > 0 && batches_ > 0) producer_ = std::thread([this] { produce(); });
}

Dataset::Epoch::~Epoch() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  if (producer_.joinable()) producer_.join();
}

void Dataset::Epoch::produce() {
  for (int64_t b = next_batch_; b < batches_; ++b) {
    {
      std::unique_lock lock(mutex_);
      changed_.wait(lock, [&] { return stopping_ || static_cast<int64_t>(ready_.size()) < dataset_.options_.prefetch; });
      if (stopping_) return;
    }
    Batch batch = dataset_.batch_at(order_, epoch_, b);
    {
      std::lock_guard lock(mutex_);
      ready_.push_back(std::move(batch));
    }
    changed_.notify_all();
  }
}

std::optional<Batch> Dataset::Epoch::next() {
  if (next_batch_ >= batches_) return std::nullopt;
  if (!producer_.joinable()) return dataset_.batch_at(order_, epoch_, next_batch_++);
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return !ready_.empty(); });
  Batch batch = std::move(ready_.front());
  ready_.pop_front();
  ++next_batch_;
  lock.unlock();
  changed_.notify_all();
  return batch;
}

}  // namespace mirra::runtime::data
