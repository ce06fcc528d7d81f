// Dataset: shuffled orders are permutations, reproducible by seed and different per epoch; batches
// hold the right examples, normalised, with the partial last batch kept or dropped; prefetching gives
// the same batches as assembling on the caller's thread; an epoch abandoned midway stops cleanly;
// the shards of the workers put every global batch back together.
#include <doctest/doctest.h>

#include <algorithm>
#include <numeric>

#include "runtime/data/dataset.h"

namespace mirra::runtime::data {
namespace {

// n examples of 2x3 bytes: example i holds bytes 10*i + j; its label is i % 7.
std::pair<IdxArray, IdxArray> numbered_examples(int64_t n) {
  IdxArray examples{{n, 2, 3}, {}}, labels{{n}, {}};
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < 6; ++j) examples.values.push_back(static_cast<uint8_t>((10 * i + j) % 256));
    labels.values.push_back(static_cast<uint8_t>(i % 7));
  }
  return {examples, labels};
}

Dataset make(int64_t n, BatchingOptions options) {
  auto [examples, labels] = numbered_examples(n);
  auto dataset = Dataset::create(examples, labels, {2, 3, 1}, options);
  REQUIRE_MESSAGE(dataset.ok(), dataset.status().to_string());
  return std::move(*dataset);
}

std::vector<Batch> all_batches(const Dataset& dataset, int64_t epoch) {
  std::vector<Batch> batches;
  auto reader = dataset.epoch(epoch);
  while (auto batch = reader.next()) batches.push_back(std::move(*batch));
  return batches;
}

// Examples as long as Fashion-MNIST's (28x28 bytes) and of an odd length, so the conversion's vector
// loop and its remainder both run: every byte is normalised as the plain formula says.
TEST_CASE("Dataset.long_examples_are_normalised_in_full") {
  const Normalization norm{.scale = 1.0 / 255.0, .mean = 0.2860, .stddev = 0.3530};
  for (const std::vector<int64_t>& shape : {std::vector<int64_t>{28, 28}, std::vector<int64_t>{7, 11}}) {
    const int64_t n = 9, size = shape[0] * shape[1];
    IdxArray examples{{n, shape[0], shape[1]}, {}}, labels{{n}, {}};
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < size; ++j) examples.values.push_back(static_cast<uint8_t>((31 * i + 7 * j) % 256));
      labels.values.push_back(static_cast<uint8_t>(i));
    }
    auto dataset = Dataset::create(examples, labels, {shape[0], shape[1], 1}, {.batch_size = 4, .seed = 5, .normalization = norm});
    REQUIRE_MESSAGE(dataset.ok(), dataset.status().to_string());
    const std::vector<int64_t> order = dataset->order(0);
    int64_t checked = 0;
    for (const Batch& batch : all_batches(*dataset, 0)) {
      for (int64_t i = 0; i < batch.size; ++i, ++checked) {
        const int64_t example = order[static_cast<size_t>(checked)];
        REQUIRE(batch.labels.data<int64_t>()[i] == example);
        for (int64_t j = 0; j < size; ++j) {
          const double byte = static_cast<double>((31 * example + 7 * j) % 256);
          REQUIRE(batch.features.data<float>()[i * size + j] ==
                  doctest::Approx((byte / 255.0 - norm.mean) / norm.stddev).epsilon(1e-6));
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
  const Normalization norm{.scale = 1.0 / 255.0, .mean = 0.5, .stddev = 0.25};
  for (bool drop : {false, true}) {
    CAPTURE(drop);
    const Dataset dataset = make(10, {.batch_size = 4, .seed = 9, .drop_remainder = drop, .normalization = norm});
    const std::vector<Batch> batches = all_batches(dataset, 2);
    REQUIRE(static_cast<int64_t>(batches.size()) == dataset.batches_per_epoch());
    REQUIRE(batches.size() == (drop ? 2u : 3u));
    const std::vector<int64_t> order = dataset.order(2);
    for (size_t b = 0; b < batches.size(); ++b) {
      const Batch& batch = batches[b];
      const int64_t expected_size = b < 2 ? 4 : 2;
      CHECK(batch.size == expected_size);
      CHECK(batch.features.shape() == TensorShape{expected_size, 2, 3, 1});
      CHECK(batch.labels.shape() == TensorShape{expected_size});
      for (int64_t i = 0; i < batch.size; ++i) {
        const int64_t example = order[b * 4 + static_cast<size_t>(i)];
        CHECK(batch.labels.data<int64_t>()[i] == example % 7);
        for (int64_t j = 0; j < 6; ++j) {
          const double byte = static_cast<double>((10 * example + j) % 256);
          CHECK(batch.features.data<float>()[i * 6 + j] == doctest::Approx((byte / 255.0 - 0.5) / 0.25).epsilon(1e-6));
        }
      }
    }
  }
}

TEST_CASE("Dataset.prefetching_gives_the_same_batches") {
  const Dataset eager = make(1001, {.batch_size = 64, .seed = 1, .prefetch = 0});
  const Dataset prefetched = make(1001, {.batch_size = 64, .seed = 1, .prefetch = 3});
  for (int64_t epoch : {0, 1}) {
    const std::vector<Batch> a = all_batches(eager, epoch), b = all_batches(prefetched, epoch);
    REQUIRE(a.size() == b.size());
    REQUIRE(a.size() == 16u);
    for (size_t i = 0; i < a.size(); ++i) {
      CHECK(a[i].features.to_vector<float>() == b[i].features.to_vector<float>());
      CHECK(a[i].labels.to_vector<int64_t>() == b[i].labels.to_vector<int64_t>());
    }
  }
}

TEST_CASE("Dataset.an_abandoned_epoch_stops_its_producer") {
  const Dataset dataset = make(5000, {.batch_size = 8, .prefetch = 4});
  for (int repeat = 0; repeat < 20; ++repeat) {
    auto reader = dataset.epoch(repeat);
    CHECK(reader.next().has_value());
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
      const std::vector<float> f = part.features.to_vector<float>();
      const std::vector<int64_t> l = part.labels.to_vector<int64_t>();
      features.insert(features.end(), f.begin(), f.end());
      labels.insert(labels.end(), l.begin(), l.end());
    }
    CHECK(features == want[b].features.to_vector<float>());
    CHECK(labels == want[b].labels.to_vector<int64_t>());
  }
}

TEST_CASE("Dataset.bad_input_is_an_error") {
  auto [examples, labels] = numbered_examples(10);
  CHECK(Dataset::create(examples, labels, {2, 3}, {.batch_size = 0}).status().message() == "batch size must be positive");
  CHECK(Dataset::create(examples, labels, {2, 3}, {.prefetch = -1}).status().message() == "prefetch must not be negative");
  CHECK(Dataset::create(examples, labels, {2, 3}, {.shard = 2, .shards = 2}).status().message() == "shard 2 of 2 does not exist");
  CHECK(Dataset::create(examples, labels, {4, 3}, {}).status().message() == "examples hold 60 bytes, not 10 x 12");
  IdxArray fewer = labels;
  fewer.dims = {9};
  fewer.values.pop_back();
  CHECK(Dataset::create(examples, fewer, {2, 3}, {}).status().message() ==
        "examples and labels disagree on the number of examples");
}

}  // namespace
}  // namespace mirra::runtime::data
