// Dataset: the feeds' checks and plan, the per-epoch shuffled order (or shuffled stream), batch
// assembly on a thread arena, and the prefetching producer.
#include "runtime/data/dataset.h"

#include <tbb/global_control.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <limits>
#include <numeric>
#include <set>

#include "graph/check.h"
#include "runtime/allocator.h"
#include "runtime/collectives/communicator.h"
#include "runtime/data/shuffle_buffer.h"
#include "runtime/random.h"

namespace mirra::runtime::data {

namespace {

constexpr int64_t kCacheLine = 64;
// Examples a thread of the arena converts at a time: small enough to share a batch of 128 out.
constexpr int64_t kExamplesPerTask = 16;

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i > 0 ? "," : "") + std::to_string(shape[i]);
  return out + "]";
}

// A stream's record as one number: its file above bit 40, its number in the file below.
int64_t stream_record_key(const StreamRecord& record) { return (record.file << 40) | record.number; }

int64_t product(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

// A stream sharded by file: the files this shard reads, and the batches of an epoch (as many as the
// shard whose files hold the fewest full shares has). No files: every shard reads every file.
struct FileShards {
  std::vector<int64_t> files;
  int64_t batches = 0;
};

graph::Expected<FileShards> deal_files(const ExampleSource& source, const BatchingOptions& options) {
  if (options.shards == 1 || options.shard_policy == ShardPolicy::example) return FileShards{};
  const StreamSource* stream = source.stream();
  const bool dealt = stream != nullptr && stream->file_count() >= options.shards;
  if (options.shard_policy == ShardPolicy::file && !dealt) {
    return graph::invalid_argument(
        stream == nullptr ? source.name() + " is read at random, so it shards by example (each worker reads only its own examples)"
                          : source.name() + ": " + std::to_string(stream->file_count()) + " files cannot be dealt to " +
                                std::to_string(options.shards) + " workers by file");
  }
  if (!dealt) return FileShards{};  // automatic, with fewer files than shards
  FileShards out{.batches = std::numeric_limits<int64_t>::max()};
  for (int64_t w = 0; w < options.shards; ++w) {
    int64_t examples = 0;
    for (int64_t f = w; f < stream->file_count(); f += options.shards) {
      examples += stream->file_size(f);
      if (w == options.shard) out.files.push_back(f);
    }
    const int64_t share = participant_share(options.batch_size, options.shards, w);
    if (share == 0) {
      return graph::invalid_argument("a batch of " + std::to_string(options.batch_size) + " cannot be shared among " +
                                     std::to_string(options.shards) + " workers");
    }
    if (examples < share) {
      return graph::invalid_argument(source.name() + ": the files of worker " + std::to_string(w) + " hold " +
                                     std::to_string(examples) + " examples, less than its share (" + std::to_string(share) +
                                     ") of a batch of " + std::to_string(options.batch_size));
    }
    out.batches = std::min(out.batches, examples / share);
  }
  return out;
}

}  // namespace

struct Dataset::Plan {
  struct Step {
    size_t field = 0;  // in the source
    Field from;
    ValueConversion conversion;
    std::vector<int64_t> shape;  // the placeholder's, per example
    int64_t out_elements = 0;
    size_t out_bytes = 0;
    ImageAugmentation augmentation;
    ImageShape image;
  };
  std::vector<Step> steps;  // one per feed
  std::vector<bool> needed;  // per source field: read by a feed
  bool all_in_memory = true;  // every needed field has rows (no read() copies)
  std::unique_ptr<tbb::task_arena> arena;  // with threads > 1
};

const Tensor& Batch::operator[](std::string_view placeholder) const {
  for (const auto& [name, tensor] : tensors) {
    if (name == placeholder) return tensor;
  }
  MIRRA_CHECK(false, "the batch feeds no placeholder '" + std::string(placeholder) + "'");
  return tensors.front().second;
}

Feeds Batch::feeds() const {
  Feeds out;
  for (const auto& [name, tensor] : tensors) out.emplace(name, tensor);
  return out;
}

graph::Expected<Dataset> Dataset::create(std::shared_ptr<const ExampleSource> source, std::vector<Feed> feeds,
                                         BatchingOptions options) {
  if (source == nullptr) return graph::invalid_argument("a data set needs a source");
  if (options.batch_size <= 0) return graph::invalid_argument("batch size must be positive");
  if (options.prefetch < 0) return graph::invalid_argument("prefetch must not be negative");
  if (options.shuffle_buffer < 1 || options.shuffle_buffer_bytes < 1) {
    return graph::invalid_argument("a shuffle buffer holds at least one record");
  }
  if (options.threads < 1 || options.threads > 1024) {
    return graph::invalid_argument("data threads must be in [1, 1024], not " + std::to_string(options.threads));
  }
  if (options.shards < 1 || options.shard < 0 || options.shard >= options.shards) {
    return graph::invalid_argument("shard " + std::to_string(options.shard) + " of " + std::to_string(options.shards) +
                                   " does not exist");
  }
  if (feeds.empty()) return graph::invalid_argument(source->name() + ": no placeholder is fed from it");
  auto plan = std::make_shared<Plan>();
  plan->needed.assign(source->fields().size(), false);
  std::set<std::string> fed;
  for (const Feed& feed : feeds) {
    const std::string what = source->name() + ", field '" + feed.field + "' feeding '" + feed.placeholder + "'";
    if (!fed.insert(feed.placeholder).second) return graph::invalid_argument("placeholder '" + feed.placeholder + "' is fed twice");
    MIRRA_ASSIGN_OR_RETURN(const size_t f, source->field_index(feed.field));
    Plan::Step step{.field = f, .from = source->fields()[f], .augmentation = feed.augmentation};
    step.conversion = {.from = step.from.type, .to = feed.dtype, .scale = feed.scale, .shift = feed.shift, .one_hot = feed.one_hot};
    if (step.conversion.shift.empty() && !step.conversion.scale.empty()) step.conversion.shift.assign(feed.scale.size(), 0.0);
    if (step.conversion.scale.empty() && !step.conversion.shift.empty()) step.conversion.scale.assign(feed.shift.size(), 1.0);
    MIRRA_RETURN_IF_ERROR(check_conversion(step.conversion, what));
    const int64_t values = step.from.elements() * std::max<int64_t>(feed.one_hot, 1);
    step.shape = feed.shape;
    if (step.shape.empty()) {
      step.shape = step.from.shape;
      if (feed.one_hot > 0) step.shape.push_back(feed.one_hot);
    }
    if (std::any_of(step.shape.begin(), step.shape.end(), [](int64_t d) { return d < 0; }) || product(step.shape) != values) {
      return graph::invalid_argument(what + ": the field's " + std::to_string(values) + " values per example (" +
                                     step.from.to_string() + (feed.one_hot > 0 ? ", one-hot" : "") + ") do not make " +
                                     shape_string(step.shape));
    }
    const size_t channels = step.conversion.scale.size();
    if (channels > 1 && (step.shape.empty() || step.shape.back() != static_cast<int64_t>(channels))) {
      return graph::invalid_argument(what + ": " + std::to_string(channels) + " normalisation channels, but the last dim of " +
                                     shape_string(step.shape) + " is not that");
    }
    MIRRA_RETURN_IF_ERROR(check_augmentation(feed.augmentation).with_context(what));
    if (feed.augmentation.enabled()) {
      const std::vector<int64_t>& s = step.from.shape;
      if (s.size() != 2 && s.size() != 3) {
        return graph::invalid_argument(what + ": image augmentation needs a field shaped (height, width[, channels]), not " +
                                       step.from.to_string());
      }
      step.image = {s[0], s[1], s.size() == 3 ? s[2] : 1, static_cast<int64_t>(element_size(step.from.type))};
    }
    step.out_elements = values;
    step.out_bytes = static_cast<size_t>(values) * graph::dtype_size(feed.dtype);
    plan->needed[f] = true;
    plan->steps.push_back(std::move(step));
  }
  for (size_t f = 0; f < plan->needed.size(); ++f) {
    if (plan->needed[f] && source->size() > 0 && source->row(f, 0) == nullptr) plan->all_in_memory = false;
  }
  MIRRA_ASSIGN_OR_RETURN(FileShards dealt, deal_files(*source, options));
  // No more than the process allows (tbb::global_control: the runner's --threads), which TBB would
  // otherwise warn of.
  const int threads = std::min<int>(options.threads, static_cast<int>(tbb::global_control::active_value(
                                                         tbb::global_control::max_allowed_parallelism)));
  if (threads > 1) plan->arena = std::make_unique<tbb::task_arena>(threads);
  Dataset dataset;
  dataset.source_ = std::move(source);
  dataset.feeds_ = std::move(feeds);
  dataset.plan_ = std::move(plan);
  dataset.options_ = options;
  dataset.shard_files_ = std::move(dealt.files);
  dataset.file_sharded_batches_ = dealt.batches;
  return dataset;
}

std::vector<std::string> Dataset::placeholders() const {
  std::vector<std::string> out;
  for (const Feed& feed : feeds_) out.push_back(feed.placeholder);
  if (!options_.example_keys.empty()) out.push_back(options_.example_keys);
  return out;
}

Dataset Dataset::reseeded(uint64_t seed) const {
  Dataset copy = *this;
  copy.options_.seed = seed;
  return copy;
}

int64_t Dataset::batches_per_epoch() const {
  if (!shard_files_.empty()) return file_sharded_batches_;
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

Dataset::Share Dataset::share_of(int64_t b) const {
  if (!shard_files_.empty()) {
    // Every batch is whole, and this shard's part of it is all of what it reads.
    return {.global = options_.batch_size, .count = participant_share(options_.batch_size, options_.shards, options_.shard)};
  }
  Share share{.global = std::min(options_.batch_size, size() - b * options_.batch_size)};
  for (int64_t w = 0; w < options_.shard; ++w) share.skipped += participant_share(share.global, options_.shards, w);
  share.count = participant_share(share.global, options_.shards, options_.shard);
  return share;
}

graph::Expected<Batch> Dataset::batch_at(const std::vector<int64_t>& order, int64_t epoch, int64_t b) const {
  const Share share = share_of(b);
  const int64_t first = b * options_.batch_size + share.skipped;
  MIRRA_ASSIGN_OR_RETURN(Batch batch, assemble(std::span(order).subspan(static_cast<size_t>(first), static_cast<size_t>(share.count)),
                                               epoch));
  batch.global_size = share.global;
  add_example_keys(batch, epoch, first, 1);
  return batch;
}

void Dataset::add_example_keys(Batch& batch, int64_t epoch, int64_t first, int64_t stride) const {
  if (options_.example_keys.empty()) return;
  Tensor keys = Tensor::empty(host_allocator(), graph::DType::i64, TensorShape{batch.size});
  int64_t* key = keys.mutable_data<int64_t>();
  for (int64_t i = 0; i < batch.size; ++i) key[i] = (epoch << 40) + first + i * stride;
  batch.tensors.emplace_back(options_.example_keys, std::move(keys));
}

graph::Expected<Batch> Dataset::stream_batch_at(ShuffledRecords& records, int64_t epoch, int64_t b) const {
  const Share share = share_of(b);
  const int64_t first = b * options_.batch_size;
  std::vector<StreamRecord> rows(static_cast<size_t>(share.count));
  std::vector<int64_t> examples(rows.size());
  const auto ended = [&](int64_t position) {
    return graph::invalid_argument(source_->name() + ": the data ended at example " + std::to_string(position) + " of " +
                                   std::to_string(size()) + " (did its files change since it was opened?)");
  };
  // Sharded by example, every shard reads every record of the stream and keeps its own; by file, all
  // it reads is its own.
  const bool own_files = !shard_files_.empty();
  const int64_t before = own_files ? 0 : share.skipped, after = own_files ? 0 : share.global - share.skipped - share.count;
  const int64_t start = own_files ? b * share.count : first + share.skipped;  // of this shard's rows, in what it reads
  MIRRA_ASSIGN_OR_RETURN(bool more, records.skip(before));
  if (!more) return ended(start);
  for (size_t i = 0; i < rows.size(); ++i) {
    examples[i] = start + static_cast<int64_t>(i);
    MIRRA_ASSIGN_OR_RETURN(more, records.next(rows[i]));
    if (!more) return ended(examples[i]);
  }
  MIRRA_ASSIGN_OR_RETURN(more, records.skip(after));
  if (!more) return ended(start + share.count);
  MIRRA_ASSIGN_OR_RETURN(Batch batch, assemble(examples, epoch, &rows));
  batch.global_size = share.global;
  if (own_files) {
    add_example_keys(batch, epoch, start * options_.shards + options_.shard, options_.shards);
  } else {
    add_example_keys(batch, epoch, start, 1);
  }
  return batch;
}

graph::Expected<Batch> Dataset::assemble(std::span<const int64_t> examples, int64_t epoch,
                                         const std::vector<StreamRecord>* records) const {
  const Plan& plan = *plan_;
  const auto count = static_cast<int64_t>(examples.size());
  Batch batch{.size = count, .global_size = count};
  std::vector<std::byte*> outputs;
  for (size_t k = 0; k < feeds_.size(); ++k) {
    std::vector<int64_t> dims = {count};
    dims.insert(dims.end(), plan.steps[k].shape.begin(), plan.steps[k].shape.end());
    Tensor tensor = Tensor::empty(host_allocator(), feeds_[k].dtype, TensorShape(dims));
    outputs.push_back(static_cast<std::byte*>(tensor.mutable_raw_data()));
    batch.tensors.emplace_back(feeds_[k].placeholder, std::move(tensor));
  }
  const std::vector<Field>& fields = source_->fields();
  const auto example_at = [&](int64_t i) { return examples[static_cast<size_t>(i)]; };

  // Examples [begin, end) of the batch; the first error, by example, wins.
  const auto convert_range = [&](int64_t begin, int64_t end) -> graph::Status {
    std::vector<std::vector<std::byte>> copies(fields.size());  // read() copies, per field
    std::vector<std::byte*> destinations(fields.size(), nullptr);
    if (!plan.all_in_memory) {
      for (size_t f = 0; f < fields.size(); ++f) {
        if (!plan.needed[f] || source_->row(f, 0) != nullptr) continue;
        copies[f].resize(fields[f].bytes());
        destinations[f] = copies[f].data();
      }
    }
    std::vector<uint8_t> augmented;
    for (int64_t i = begin; i < end; ++i) {
      const int64_t example = example_at(i);
      if (plan.all_in_memory && i + 1 < end) {
        // The examples are scattered over the data set: fetch the next one's values while this one converts.
        for (const Plan::Step& step : plan.steps) {
          const std::byte* next = source_->row(step.field, example_at(i + 1));
          for (size_t line = 0; line < step.from.bytes(); line += kCacheLine) __builtin_prefetch(next + line);
        }
      }
      if (records != nullptr) {
        MIRRA_RETURN_IF_ERROR(source_->stream()->decode((*records)[static_cast<size_t>(i)], destinations));
      } else if (!plan.all_in_memory) {
        if (const graph::Status read = source_->read(example, {.seed = options_.seed, .epoch = epoch}, destinations); !read.ok()) {
          return read.with_context(source_->name() + ", example " + std::to_string(example));
        }
      }
      for (size_t k = 0; k < plan.steps.size(); ++k) {
        const Plan::Step& step = plan.steps[k];
        const std::byte* values = copies[step.field].empty() ? source_->row(step.field, example) : copies[step.field].data();
        if (step.augmentation.enabled()) {
          augmented.resize(step.from.bytes());
          // A stream's record is known by its file and number, whoever reads it and wherever the shuffle puts it.
          const int64_t drawn = records == nullptr ? example : stream_record_key((*records)[static_cast<size_t>(i)]);
          augment_image(reinterpret_cast<const uint8_t*>(values), augmented.data(), step.image, step.augmentation,
                        {.seed = options_.seed, .epoch = epoch, .example = drawn});
          values = reinterpret_cast<const std::byte*>(augmented.data());
        }
        const graph::Status converted = convert_values(step.conversion, values, step.from.elements(),
                                                       outputs[k] + static_cast<size_t>(i) * step.out_bytes);
        if (!converted.ok()) {
          return graph::invalid_argument(source_->name() + ", example " + std::to_string(example) + ", field '" +
                                         step.from.name + "' (feeding '" + feeds_[k].placeholder + "'): " + converted.message());
        }
      }
    }
    return graph::Status();
  };

  if (plan.arena == nullptr || count <= kExamplesPerTask) {
    MIRRA_RETURN_IF_ERROR(convert_range(0, count));
    return batch;
  }
  const int64_t tasks = (count + kExamplesPerTask - 1) / kExamplesPerTask;
  std::vector<graph::Status> failures(static_cast<size_t>(tasks));
  plan.arena->execute([&] {
    tbb::parallel_for(int64_t{0}, tasks, [&](int64_t t) {
      failures[static_cast<size_t>(t)] = convert_range(t * kExamplesPerTask, std::min(count, (t + 1) * kExamplesPerTask));
    });
  });
  for (const graph::Status& failure : failures) MIRRA_RETURN_IF_ERROR(failure);
  return batch;
}

Dataset::Epoch Dataset::epoch(int64_t epoch, int64_t first_batch) const { return Epoch(*this, epoch, first_batch); }

Dataset::Epoch::Epoch(const Dataset& dataset, int64_t epoch, int64_t first_batch)
    : dataset_(dataset),
      epoch_(epoch),
      order_(dataset.source().stream() != nullptr ? std::vector<int64_t>() : dataset.order(epoch)),
      batches_(dataset.batches_per_epoch()),
      next_batch_(std::clamp<int64_t>(first_batch, 0, batches_)) {
  if (dataset_.options_.prefetch > 0 && next_batch_ < batches_) producer_ = std::thread([this] { produce(); });
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
    graph::Expected<Batch> batch = this->batch(b);
    const bool failed = !batch.ok();
    {
      std::lock_guard lock(mutex_);
      ready_.push_back(std::move(batch));
    }
    changed_.notify_all();
    if (failed) return;  // next() reports it; nothing after it is read
  }
}

graph::Expected<Batch> Dataset::Epoch::batch(int64_t b) {
  const StreamSource* stream = dataset_.source().stream();
  if (stream == nullptr) return dataset_.batch_at(order_, epoch_, b);
  if (!records_) {
    const BatchingOptions& options = dataset_.options_;
    const ShuffleBufferSize buffer{.records = static_cast<size_t>(options.shuffle_buffer),
                                   .bytes = static_cast<size_t>(options.shuffle_buffer_bytes)};
    std::vector<int64_t> files = dataset_.shard_files_;
    if (files.empty()) {
      files.resize(static_cast<size_t>(stream->file_count()));
      std::iota(files.begin(), files.end(), int64_t{0});
    }
    MIRRA_ASSIGN_OR_RETURN(ShuffledRecords records, ShuffledRecords::open(*stream, std::move(files), {.seed = options.seed, .epoch = epoch_},
                                                                          buffer, options.shuffle));
    records_ = std::make_unique<ShuffledRecords>(std::move(records));
    // A resumed epoch passes over the batches before it (of a shard's own files, its shares of them).
    const int64_t per_batch = dataset_.shard_files_.empty() ? options.batch_size : dataset_.share_of(0).count;
    MIRRA_ASSIGN_OR_RETURN(const bool more, records_->skip(b * per_batch));
    if (!more) return graph::invalid_argument(stream->name() + ": the data ended before batch " + std::to_string(b));
  }
  return dataset_.stream_batch_at(*records_, epoch_, b);
}

graph::Expected<std::optional<Batch>> Dataset::Epoch::next() {
  if (next_batch_ >= batches_) return std::optional<Batch>();
  if (!producer_.joinable()) {
    MIRRA_ASSIGN_OR_RETURN(Batch batch, this->batch(next_batch_));
    ++next_batch_;
    return std::optional<Batch>(std::move(batch));
  }
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return !ready_.empty(); });
  graph::Expected<Batch> batch = std::move(ready_.front());
  ready_.pop_front();
  lock.unlock();
  changed_.notify_all();
  if (!batch.ok()) {
    next_batch_ = batches_;  // the producer has stopped
    return batch.status();
  }
  ++next_batch_;
  return std::optional<Batch>(std::move(*batch));
}

}  // namespace mirra::runtime::data
