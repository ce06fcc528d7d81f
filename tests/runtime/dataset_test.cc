// Dataset: shuffled orders are permutations, reproducible by seed and different per epoch; batches
// hold the right examples, converted, normalised (per channel too), reshaped and one-hot encoded as
// their feeds say, with the partial last batch kept or dropped; prefetching and several assembling
// threads give the same batches as assembling on the caller's thread; a source read by copies gives
// what one read in place gives; an epoch abandoned midway stops cleanly; the shards of the workers put
// every global batch back together; bad feeds are refused naming the field and placeholder, and a
// value that cannot be converted stops the epoch naming the example.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <numeric>

#include "runtime/data/dataset.h"
#include "runtime/data/fashion_mnist.h"

namespace mirra::runtime::data {
namespace {

// n examples of 2x3 bytes: example i holds bytes 10*i + j; its label is i % 7.
LabelledImages numbered_examples(int64_t n) {
  LabelledImages data{{{n, 2, 3}, {}}, {{n}, {}}};
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < 6; ++j) data.images.values.push_back(static_cast<uint8_t>((10 * i + j) % 256));
    data.labels.values.push_back(static_cast<uint8_t>(i % 7));
  }
  return data;
}

Dataset make(int64_t n, BatchingOptions options, ClassifierFeeds feeds = {}) {
  auto dataset = labelled_images_dataset(numbered_examples(n), "numbers", {2, 3, 1}, options, feeds);
  REQUIRE_MESSAGE(dataset.ok(), dataset.status().to_string());
  return std::move(*dataset);
}

std::vector<Batch> all_batches(const Dataset& dataset, int64_t epoch) {
  std::vector<Batch> batches;
  auto reader = dataset.epoch(epoch);
  for (;;) {
    auto batch = reader.next();
    REQUIRE_MESSAGE(batch.ok(), batch.status().to_string());
    if (!*batch) break;
    batches.push_back(std::move(**batch));
  }
  return batches;
}

// Examples as long as Fashion-MNIST's (28x28 bytes) and of an odd length, so the conversion's vector
// loop and its remainder both run: every byte is normalised as the plain formula says.
TEST_CASE("Dataset.long_examples_are_normalised_in_full") {
  const double mean = 0.2860, stddev = 0.3530;
  for (const std::vector<int64_t>& shape : {std::vector<int64_t>{28, 28}, std::vector<int64_t>{7, 11}}) {
    const int64_t n = 9, size = shape[0] * shape[1];
    LabelledImages data{{{n, shape[0], shape[1]}, {}}, {{n}, {}}};
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < size; ++j) data.images.values.push_back(static_cast<uint8_t>((31 * i + 7 * j) % 256));
      data.labels.values.push_back(static_cast<uint8_t>(i));
    }
    auto dataset = labelled_images_dataset(std::move(data), "long", {shape[0], shape[1], 1}, {.batch_size = 4, .seed = 5},
                                           {.scale = {1.0 / (255.0 * stddev)}, .shift = {-mean / stddev}});
    REQUIRE_MESSAGE(dataset.ok(), dataset.status().to_string());
    const std::vector<int64_t> order = dataset->order(0);
    int64_t checked = 0;
    for (const Batch& batch : all_batches(*dataset, 0)) {
      for (int64_t i = 0; i < batch.size; ++i, ++checked) {
        const int64_t example = order[static_cast<size_t>(checked)];
        REQUIRE(batch["labels"].data<int64_t>()[i] == example);
        for (int64_t j = 0; j < size; ++j) {
          const double byte = static_cast<double>((31 * example + 7 * j) % 256);
          REQUIRE(batch["images"].data<float>()[i * size + j] == doctest::Approx((byte / 255.0 - mean) / stddev).epsilon(1e-6));
        }
      }
    }
    CHECK(checked == n);
  }
}

TEST_CASE("Dataset.orders_are_seeded_permutations") {
  const Dataset a = make(1000, {.seed = 3}), b = make(1000, {.seed = 3}), c = make(1000, {.seed = 4});
  std::vector<int64_t> sorted = a.order(0);
  std::sort(sorted.begin(), sorted.end());
  std::vector<int64_t> identity(1000);
  std::iota(identity.begin(), identity.end(), 0);
  CHECK(sorted == identity);
  CHECK(a.order(0) != identity);
  CHECK(a.order(0) == b.order(0));
  CHECK(a.order(1) == b.order(1));
  CHECK(a.order(0) != a.order(1));
  CHECK(a.order(0) != c.order(0));
  CHECK(make(1000, {.shuffle = false}).order(5) == identity);
}

TEST_CASE("Dataset.batches_hold_the_ordered_examples_normalised") {
  for (bool drop : {false, true}) {
    CAPTURE(drop);
    const Dataset dataset = make(10, {.batch_size = 4, .seed = 9, .drop_remainder = drop},
                                 {.scale = {1.0 / (255.0 * 0.25)}, .shift = {-0.5 / 0.25}});
    const std::vector<Batch> batches = all_batches(dataset, 2);
    REQUIRE(static_cast<int64_t>(batches.size()) == dataset.batches_per_epoch());
    REQUIRE(batches.size() == (drop ? 2u : 3u));
    const std::vector<int64_t> order = dataset.order(2);
    for (size_t b = 0; b < batches.size(); ++b) {
      const Batch& batch = batches[b];
      const int64_t expected_size = b < 2 ? 4 : 2;
      CHECK(batch.size == expected_size);
      CHECK(batch["images"].shape() == TensorShape{expected_size, 2, 3, 1});
      CHECK(batch["labels"].shape() == TensorShape{expected_size});
      for (int64_t i = 0; i < batch.size; ++i) {
        const int64_t example = order[b * 4 + static_cast<size_t>(i)];
        CHECK(batch["labels"].data<int64_t>()[i] == example % 7);
        for (int64_t j = 0; j < 6; ++j) {
          const double byte = static_cast<double>((10 * example + j) % 256);
          CHECK(batch["images"].data<float>()[i * 6 + j] == doctest::Approx((byte / 255.0 - 0.5) / 0.25).epsilon(1e-6));
        }
      }
    }
  }
}

// A source of three fields, each of another type: i16 readings [4, 3] (3 channels), an i32 class, a
// bool flag; example i's reading k is 100 * i - k, its class i % 5, its flag i % 2. With `copies`, it
// is read through read() (a file that is not in memory), else in place.
class Readings final : public ExampleSource {
 public:
  Readings(int64_t n, bool copies) : n_(n), copies_(copies) {
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t k = 0; k < 12; ++k) readings_.push_back(static_cast<int16_t>(100 * i - k));
      classes_.push_back(static_cast<int32_t>(i % 5));
      flags_.push_back(static_cast<uint8_t>(i % 2));
    }
  }
  const std::string& name() const override { return name_; }
  const std::vector<Field>& fields() const override { return fields_; }
  int64_t size() const override { return n_; }
  graph::Status read(int64_t index, const Draw& /*draw*/, std::span<std::byte* const> out) const override {
    if (index == broken_) return graph::invalid_argument("record " + std::to_string(index) + " is corrupt");
    for (size_t f = 0; f < fields_.size(); ++f) {
      if (out[f] != nullptr) std::memcpy(out[f], place(f, index), fields_[f].bytes());
    }
    return graph::Status();
  }
  const std::byte* row(size_t field, int64_t index) const override { return copies_ ? nullptr : place(field, index); }
  int64_t broken_ = -1;  // read() fails there

 private:
  const std::byte* place(size_t f, int64_t i) const {
    const auto at = [&](const auto& values, int64_t per) { return reinterpret_cast<const std::byte*>(values.data() + i * per); };
    return f == 0 ? at(readings_, 12) : f == 1 ? at(classes_, 1) : at(flags_, 1);
  }
  std::string name_ = "readings";
  std::vector<Field> fields_ = {{"reading", ElementType::i16, {4, 3}}, {"class", ElementType::i32, {}}, {"flag", ElementType::boolean, {}}};
  int64_t n_;
  bool copies_;
  std::vector<int16_t> readings_;
  std::vector<int32_t> classes_;
  std::vector<uint8_t> flags_;
};

std::vector<Feed> readings_feeds() {
  return {{.placeholder = "x", .field = "reading", .dtype = graph::DType::f64, .shape = {4, 1, 3},
           .scale = {0.5, 1, 2}, .shift = {1, 0, -1}},
          {.placeholder = "y", .field = "class", .dtype = graph::DType::f32, .one_hot = 5},
          {.placeholder = "flag", .field = "flag", .dtype = graph::DType::i64},
          {.placeholder = "class", .field = "class", .dtype = graph::DType::i64}};
}

TEST_CASE("Dataset.feeds_convert_normalise_per_channel_reshape_and_one_hot_encode") {
  for (bool copies : {false, true}) {
    for (int threads : {1, 3}) {
      CAPTURE(copies); CAPTURE(threads);
      auto dataset = Dataset::create(std::make_shared<Readings>(50, copies), readings_feeds(),
                                     {.batch_size = 40, .seed = 2, .threads = threads});
      REQUIRE_MESSAGE(dataset.ok(), dataset.status().to_string());
      const std::vector<int64_t> order = dataset->order(0);
      const std::vector<Batch> batches = all_batches(*dataset, 0);
      REQUIRE(batches.size() == 2u);
      const Batch& batch = batches[0];
      CHECK(batch["x"].type_string() == "f64[40,4,1,3]");
      CHECK(batch["y"].type_string() == "f32[40,5]");
      CHECK(batch["flag"].type_string() == "i64[40]");
      for (int64_t b = 0; b < 40; ++b) {
        const int64_t i = order[static_cast<size_t>(b)];
        for (int64_t k = 0; k < 12; ++k) {
          const double scale[] = {0.5, 1, 2}, shift[] = {1, 0, -1};
          CHECK(batch["x"].data<double>()[b * 12 + k] == (100.0 * i - k) * scale[k % 3] + shift[k % 3]);
        }
        for (int64_t c = 0; c < 5; ++c) CHECK(batch["y"].data<float>()[b * 5 + c] == (c == i % 5 ? 1.0f : 0.0f));
        CHECK(batch["flag"].data<int64_t>()[b] == i % 2);
        CHECK(batch["class"].data<int64_t>()[b] == i % 5);
      }
    }
  }
}

TEST_CASE("Dataset.several_threads_and_prefetching_give_the_same_batches") {
  const Dataset eager = make(1001, {.batch_size = 64, .seed = 1, .prefetch = 0});
  const Dataset prefetched = make(1001, {.batch_size = 64, .seed = 1, .prefetch = 3});
  const Dataset threaded = make(1001, {.batch_size = 64, .seed = 1, .prefetch = 2, .threads = 4});
  for (int64_t epoch : {0, 1}) {
    const std::vector<Batch> a = all_batches(eager, epoch);
    REQUIRE(a.size() == 16u);
    for (const Dataset* other : {&prefetched, &threaded}) {
      const std::vector<Batch> b = all_batches(*other, epoch);
      REQUIRE(a.size() == b.size());
      for (size_t i = 0; i < a.size(); ++i) {
        CHECK(a[i]["images"].to_vector<float>() == b[i]["images"].to_vector<float>());
        CHECK(a[i]["labels"].to_vector<int64_t>() == b[i]["labels"].to_vector<int64_t>());
      }
    }
  }
}

TEST_CASE("Dataset.an_abandoned_epoch_stops_its_producer") {
  const Dataset dataset = make(5000, {.batch_size = 8, .prefetch = 4});
  for (int repeat = 0; repeat < 20; ++repeat) {
    auto reader = dataset.epoch(repeat);
    auto batch = reader.next();
    REQUIRE(batch.ok());
    CHECK(batch->has_value());
  }  // each reader's destructor stops and joins its producer, which may be blocked on a full queue
}

TEST_CASE("Dataset.shards_split_every_global_batch_by_tensorflows_rule") {
  // 23 examples in batches of 10: the last batch of 3 gives shards of 1, 1, 1 and 0.
  const Dataset whole = make(23, {.batch_size = 10, .seed = 5});
  const std::vector<Batch> want = all_batches(whole, 1);
  std::vector<std::vector<Batch>> shards;
  for (int64_t shard = 0; shard < 4; ++shard) {
    shards.push_back(all_batches(make(23, {.batch_size = 10, .seed = 5, .prefetch = shard % 2 == 0 ? 2 : 0, .shard = shard, .shards = 4}), 1));
    REQUIRE(shards.back().size() == want.size());
  }
  for (size_t b = 0; b < want.size(); ++b) {
    CAPTURE(b);
    std::vector<float> features;
    std::vector<int64_t> labels;
    for (int64_t shard = 0; shard < 4; ++shard) {
      const Batch& part = shards[static_cast<size_t>(shard)][b];
      CHECK(part.size == want[b].size / 4 + (shard < want[b].size % 4 ? 1 : 0));
      CHECK(part.global_size == want[b].size);
      const std::vector<float> f = part["images"].to_vector<float>();
      const std::vector<int64_t> l = part["labels"].to_vector<int64_t>();
      features.insert(features.end(), f.begin(), f.end());
      labels.insert(labels.end(), l.begin(), l.end());
    }
    CHECK(features == want[b]["images"].to_vector<float>());
    CHECK(labels == want[b]["labels"].to_vector<int64_t>());
  }
}

// Each example's key is its epoch and its position in the epoch's order: the same whatever the batch
// size or the shards, so what is drawn from it (dropout) does not change with them.
TEST_CASE("Dataset.example_keys_number_the_epochs_examples_whatever_the_batching") {
  const auto keys_of = [](BatchingOptions options, int64_t epoch) {
    options.example_keys = "keys";
    std::vector<int64_t> keys;
    const Dataset data = make(23, options);
    auto batches = data.epoch(epoch);
    while (true) {
      auto batch = batches.next();
      REQUIRE(batch.ok());
      if (!*batch) break;
      const std::vector<int64_t> part = (**batch)["keys"].to_vector<int64_t>();
      keys.insert(keys.end(), part.begin(), part.end());
    }
    return keys;
  };
  std::vector<int64_t> want;
  for (int64_t i = 0; i < 23; ++i) want.push_back((int64_t{3} << 40) + i);
  CHECK(keys_of({.batch_size = 10, .seed = 5}, 3) == want);
  CHECK(keys_of({.batch_size = 4, .seed = 5, .prefetch = 0}, 3) == want);
  std::vector<int64_t> sharded;  // the shards' keys, batch by batch
  for (int64_t b = 0; b < 3; ++b) {
    for (int64_t shard = 0; shard < 2; ++shard) {
      const std::vector<int64_t> keys = keys_of({.batch_size = 10, .seed = 5, .shard = shard, .shards = 2}, 3);
      // Each shard takes 5 of a batch of 10, and 2 and 1 of the last, of 3.
      const int64_t first = 5 * b, count = b < 2 ? 5 : (shard == 0 ? 2 : 1);
      sharded.insert(sharded.end(), keys.begin() + first, keys.begin() + first + count);
    }
  }
  CHECK(sharded == want);
}

std::string refusal(std::vector<Feed> feeds, BatchingOptions options = {}) {
  return Dataset::create(std::make_shared<Readings>(10, false), std::move(feeds), options).status().message();
}

TEST_CASE("Dataset.bad_feeds_and_options_are_refused_naming_them") {
  const Feed x{.placeholder = "x", .field = "reading", .dtype = graph::DType::f32};
  CHECK(refusal({x}, {.batch_size = 0}) == "batch size must be positive");
  CHECK(refusal({x}, {.prefetch = -1}) == "prefetch must not be negative");
  CHECK(refusal({x}, {.threads = 0}) == "data threads must be in [1, 1024], not 0");
  CHECK(refusal({x}, {.shard = 2, .shards = 2}) == "shard 2 of 2 does not exist");
  CHECK(refusal({}) == "readings: no placeholder is fed from it");
  CHECK(refusal({{.placeholder = "x", .field = "pixels"}}) ==
        "readings has no field 'pixels' (its fields: reading: i16[4,3], class: i32[], flag: bool[])");
  CHECK(refusal({x, x}) == "placeholder 'x' is fed twice");
  CHECK(refusal({{.placeholder = "x", .field = "reading", .dtype = graph::DType::f32, .shape = {5, 3}}}) ==
        "readings, field 'reading' feeding 'x': the field's 12 values per example (reading: i16[4,3]) do not make [5,3]");
  CHECK(refusal({{.placeholder = "x", .field = "reading", .dtype = graph::DType::f32, .scale = {1, 2}}}) ==
        "readings, field 'reading' feeding 'x': 2 normalisation channels, but the last dim of [4,3] is not that");
  CHECK(refusal({{.placeholder = "x", .field = "reading", .dtype = graph::DType::i64, .scale = {2}}}) ==
        "readings, field 'reading' feeding 'x': only values fed to a floating placeholder can be normalised, not i64");
  CHECK(refusal({{.placeholder = "y", .field = "flag", .dtype = graph::DType::f32, .one_hot = 2}}) ==
        "readings, field 'flag' feeding 'y': one_hot needs an integer field, not bool");
  CHECK(refusal({{.placeholder = "x", .field = "class", .dtype = graph::DType::f32, .augmentation = {.horizontal_flip = true}}}) ==
        "readings, field 'class' feeding 'x': image augmentation needs a field shaped (height, width[, channels]), not "
        "class: i32[]");
  auto floats = std::make_shared<ArraySource>(*ArraySource::create("floats", {owned_array(Field{"v", ElementType::f32, {}}, std::vector<float>{1.5f})}, 1).value());
  CHECK(Dataset::create(floats, {{.placeholder = "n", .field = "v", .dtype = graph::DType::i64}}, {}).status().message() ==
        "floats, field 'v' feeding 'n': a f32 field does not feed an i64 placeholder (its values are not integers)");
}

graph::Status first_error(const Dataset& dataset) {
  auto reader = dataset.epoch(0);
  for (;;) {
    auto batch = reader.next();
    if (!batch.ok()) return batch.status();
    if (!*batch) return graph::Status();
  }
}

TEST_CASE("Dataset.a_value_that_cannot_be_fed_stops_the_epoch_naming_the_example") {
  for (int prefetch : {0, 2}) {
    CAPTURE(prefetch);
    // Classes 0..4 into a one-hot of 4: example 4 (class 4) is the first outside it in data set order.
    auto one_hot = Dataset::create(std::make_shared<Readings>(10, false),
                                   {{.placeholder = "y", .field = "class", .dtype = graph::DType::f32, .one_hot = 4}},
                                   {.batch_size = 10, .shuffle = false, .prefetch = prefetch});
    REQUIRE(one_hot.ok());
    CHECK(first_error(*one_hot).message() == "readings, example 4, field 'class' (feeding 'y'): value 0 is class 4, outside [0, 4)");
    // -100 * i - k does not fit u8 from example 1 on.
    auto narrow = Dataset::create(std::make_shared<Readings>(10, false),
                                  {{.placeholder = "x", .field = "reading", .dtype = graph::DType::u8}},
                                  {.batch_size = 3, .shuffle = false, .prefetch = prefetch});
    REQUIRE(narrow.ok());
    CHECK(first_error(*narrow).message() == "readings, example 0, field 'reading' (feeding 'x'): value 1 is -1, which u8 cannot hold");
    auto broken = std::make_shared<Readings>(10, true);
    broken->broken_ = 7;
    auto corrupt = Dataset::create(broken, readings_feeds(), {.batch_size = 4, .shuffle = false, .prefetch = prefetch});
    REQUIRE(corrupt.ok());
    CHECK(first_error(*corrupt).message() == "readings, example 7: record 7 is corrupt");
  }
}

TEST_CASE("Dataset.labelled_images_must_fill_their_dims") {
  LabelledImages data = numbered_examples(10);
  data.labels.values.pop_back();
  CHECK(labelled_images_dataset(data, "short", {2, 3}, {}).status().message() ==
        "short: the images' or the labels' values do not fill their dims");
  data.labels.dims = {9};
  CHECK(labelled_images_dataset(data, "fewer", {2, 3}, {}).status().message() ==
        "fewer: the images and the labels disagree on the number of examples");
}

}  // namespace
}  // namespace mirra::runtime::data
