// GZIP TFRecord files read as a stream: every record of every gzip member and file, in order, with its
// file, number and byte offset; damaged files refused when the data set opens (naming the record) or
// their corrupt records skipped; the shuffle buffer's order (a permutation, reproducible from (seed,
// epoch), each record drawn at most `buffer` places before it entered, the buffer bounded in records
// and in bytes); and the Dataset's batches of a stream, sharded by example or by file, resumed and
// prefetched, as its order says.
#include <doctest/doctest.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>

#include "runtime/data/dataset.h"
#include "runtime/data/shuffle_buffer.h"
#include "runtime/data/stream_source.h"
#include "runtime/data/tfrecord_file.h"
#include "tests/tfrecord_writer.h"

namespace mirra::runtime::data {
namespace {

const TfRecordOptions kSpec{.features = {{"x", {.type = "float", .shape = {3}}}, {"y", {.type = "int64"}}}, .gzip = true};

struct Scratch {
  std::filesystem::path dir = std::filesystem::temp_directory_path() / ("mirra_stream_test_" + std::to_string(::getpid()));
  Scratch() { std::filesystem::create_directories(dir); }
  ~Scratch() {
    std::error_code ignored;
    std::filesystem::remove_all(dir, ignored);
  }
  std::string path(const std::string& name) const { return (dir / name).string(); }

  // Examples [first, first + count): x = {y, y + 0.5, -y}, y the example's number.
  std::string records(const std::string& name, int64_t first, int64_t count, bool gzip = true) const {
    test::TfRecordWriter out(path(name), gzip);
    for (int64_t y = first; y < first + count; ++y) {
      const float x[] = {static_cast<float>(y), static_cast<float>(y) + 0.5f, -static_cast<float>(y)};
      const int64_t label[] = {y};
      out.write(test::TfExampleBuilder().floats("x", x).int64s("y", label).bytes());
    }
    return path(name);
  }
  static std::string contents(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }
  std::string write(const std::string& name, const std::string& bytes) const {
    std::ofstream(path(name), std::ios::binary) << bytes;
    return path(name);
  }
  std::string gzipped(const std::string& name, const std::string& bytes) const {
    gzFile out = gzopen(path(name).c_str(), "wb");
    gzwrite(out, bytes.data(), static_cast<unsigned>(bytes.size()));
    gzclose(out);
    return path(name);
  }
};

// The labels of the records a pass over `files` gives, each decoded and its x checked.
std::vector<int64_t> labels_of(const StreamSource& stream, std::vector<int64_t> files) {
  auto pass = stream.open(std::move(files));
  REQUIRE_MESSAGE(pass.ok(), pass.status().to_string());
  std::vector<int64_t> labels;
  StreamRecord record;
  while (true) {
    auto more = (*pass)->next(record);
    REQUIRE_MESSAGE(more.ok(), more.status().to_string());
    if (!*more) break;
    float x[3];
    int64_t y;
    std::byte* out[] = {reinterpret_cast<std::byte*>(x), reinterpret_cast<std::byte*>(&y)};
    REQUIRE(stream.decode(record, out).ok());
    CHECK(x[0] == static_cast<float>(y));
    CHECK(x[1] == static_cast<float>(y) + 0.5f);
    CHECK(x[2] == -static_cast<float>(y));
    labels.push_back(y);
  }
  return labels;
}

std::vector<int64_t> iota(int64_t first, int64_t count) {
  std::vector<int64_t> out(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) out[static_cast<size_t>(i)] = first + i;
  return out;
}

std::vector<int64_t> concat(std::vector<int64_t> a, const std::vector<int64_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

TEST_CASE("TfRecordStream.reads_every_record_of_every_member_and_file_in_order") {
  const Scratch scratch;
  const std::string one = scratch.records("one.tfrecord.gz", 0, 10);
  // Two gzip members, one after the other (as `cat a.gz b.gz` makes them).
  const std::string members = scratch.write("members.tfrecord.gz", Scratch::contents(scratch.records("a.gz", 10, 4)) +
                                                                         Scratch::contents(scratch.records("b.gz", 14, 3)));
  auto opened = tfrecord_source({one, members}, kSpec);
  REQUIRE_MESSAGE(opened.ok(), opened.status().to_string());
  const ExampleSource& source = *opened->source;
  REQUIRE(source.stream() != nullptr);
  const StreamSource& stream = *source.stream();
  CHECK(source.size() == 17);
  CHECK(stream.file_count() == 2);
  CHECK(source.name() == "TFRecord files '" + one + "' and 1 more");
  CHECK(labels_of(stream, {0, 1}) == iota(0, 17));
  CHECK(labels_of(stream, {1, 0}) == concat(iota(10, 7), iota(0, 10)));
  CHECK(labels_of(stream, {1}) == iota(10, 7));
  // The same records, uncompressed, are read at random, and agree.
  auto plain = tfrecord_source({scratch.records("one.tfrecord", 0, 10, false)}, {.features = kSpec.features});
  REQUIRE(plain.ok());
  CHECK(plain->source->stream() == nullptr);
  // A record's place: its number in its file and its offset in the inflated bytes.
  auto pass = stream.open({1});
  REQUIRE(pass.ok());
  StreamRecord record;
  REQUIRE(*(*pass)->next(record));
  REQUIRE(*(*pass)->next(record));
  CHECK(record.file == 1);
  CHECK(record.number == 1);
  CHECK(record.offset == record.bytes.size() + kTfRecordHeaderBytes + kTfRecordFooterBytes);
  std::byte* none[] = {nullptr, nullptr};
  CHECK(source.read(0, {}, none).message() == source.name() + ": example 0 cannot be read at random: the data set is read in order");
  CHECK(stream.open({2}).status().message() == source.name() + " has no file 2");
}

TEST_CASE("TfRecordStream.damaged_files_are_refused_when_opened_or_their_corrupt_records_skipped") {
  const Scratch scratch;
  const std::string plain = Scratch::contents(scratch.records("plain.tfrecord", 0, 6, false));
  const size_t record_bytes = plain.size() / 6;
  std::string flipped = plain;
  flipped[record_bytes + 20] ^= 0x01;  // record 1's data
  const std::string corrupt = scratch.gzipped("corrupt.gz", flipped);
  CHECK(tfrecord_source({corrupt}, kSpec).status().message() ==
        "TFRecord file '" + corrupt + "', record 1 at byte " + std::to_string(record_bytes) + ": corrupt (its data's CRC-32C does not match)");
  TfRecordOptions skipping = kSpec;
  skipping.skip_corrupt = true;
  auto skipped = tfrecord_source({corrupt}, skipping);
  REQUIRE_MESSAGE(skipped.ok(), skipped.status().to_string());
  CHECK(skipped->skipped == 1);
  CHECK(skipped->source->size() == 5);
  CHECK(labels_of(*skipped->source->stream(), {0}) == std::vector<int64_t>{0, 2, 3, 4, 5});

  std::string length = plain;
  length[3 * record_bytes + 2] ^= 0x01;  // record 3's length
  const std::string bad_length = scratch.gzipped("length.gz", length);
  CHECK(tfrecord_source({bad_length}, skipping).status().message() ==
        "TFRecord file '" + bad_length + "', record 3 at byte " + std::to_string(3 * record_bytes) +
            ": corrupt (its length's CRC-32C does not match)");
  // A length of 2^40 with a matching CRC: refused as truncated, without holding 2^40 bytes.
  std::string huge = plain.substr(0, record_bytes);
  const uint64_t claimed = uint64_t{1} << 40;
  const uint32_t claimed_crc = masked_crc32c(std::as_bytes(std::span(&claimed, 1)));
  huge.append(reinterpret_cast<const char*>(&claimed), 8).append(reinterpret_cast<const char*>(&claimed_crc), 4).append(100, 'x');
  const std::string bad_huge = scratch.gzipped("huge.gz", huge);
  CHECK(tfrecord_source({bad_huge}, kSpec).status().message() ==
        "TFRecord file '" + bad_huge + "', record 1 at byte " + std::to_string(record_bytes) + ": truncated (it claims 1099511627776 bytes)");
  const std::string cut = scratch.gzipped("cut.gz", plain.substr(0, plain.size() - 3));
  CHECK(tfrecord_source({cut}, kSpec).status().message() ==
        "TFRecord file '" + cut + "', record 5 at byte " + std::to_string(5 * record_bytes) + ": truncated (it claims " +
            std::to_string(record_bytes - 16) + " bytes)");
  const std::string compressed = Scratch::contents(scratch.records("whole.gz", 0, 6));
  const std::string truncated = scratch.write("truncated.gz", compressed.substr(0, compressed.size() - 10));
  CHECK(tfrecord_source({truncated}, kSpec).status().message() == "TFRecord file '" + truncated + "': a truncated GZIP file");
  const std::string not_gzip = scratch.write("plain.gz", plain);
  CHECK(tfrecord_source({not_gzip}, kSpec).status().message() ==
        "TFRecord file '" + not_gzip + "': not a GZIP file, or a damaged one (zlib: incorrect header check)");
  const std::string empty = scratch.write("empty.gz", "");
  CHECK(tfrecord_source({empty}, kSpec).status().message() == "TFRecord file '" + empty + "': a truncated GZIP file");
  CHECK(tfrecord_source({scratch.path("missing.gz")}, kSpec).status().message() ==
        "TFRecord file '" + scratch.path("missing.gz") + "' cannot be opened: No such file or directory");
  // A GZIP file of no records is an empty data set, not an error.
  auto nothing = tfrecord_source({scratch.gzipped("nothing.gz", "")}, kSpec);
  REQUIRE_MESSAGE(nothing.ok(), nothing.status().to_string());
  CHECK(nothing->source->size() == 0);
}

// The labels in the order ShuffledRecords gives them.
std::vector<int64_t> shuffled(const StreamSource& stream, const Draw& draw, size_t buffer, bool shuffle = true,
                              size_t bytes = size_t{256} << 20) {
  auto records = ShuffledRecords::open(stream, iota(0, stream.file_count()), draw, {.records = buffer, .bytes = bytes}, shuffle);
  REQUIRE_MESSAGE(records.ok(), records.status().to_string());
  std::vector<int64_t> labels;
  StreamRecord record;
  while (*records->next(record)) {
    float x[3];
    int64_t y;
    std::byte* out[] = {reinterpret_cast<std::byte*>(x), reinterpret_cast<std::byte*>(&y)};
    REQUIRE(stream.decode(record, out).ok());
    labels.push_back(y);
  }
  return labels;
}

// The bytes of the first record of `stream` (the others differ from it by a byte at most).
size_t shuffled_record_bytes(const StreamSource& stream) {
  auto pass = stream.open({0});
  StreamRecord record;
  REQUIRE(*(*pass)->next(record));
  return record.bytes.size();
}

TEST_CASE("ShuffledRecords.draws_a_reproducible_permutation_each_record_within_its_buffer") {
  const Scratch scratch;
  auto one_file = tfrecord_source({scratch.records("one.gz", 0, 200)}, kSpec);
  REQUIRE(one_file.ok());
  const StreamSource& stream = *one_file->source->stream();
  for (const size_t buffer : {size_t{1}, size_t{7}, size_t{64}, size_t{1000}}) {
    CAPTURE(buffer);
    const std::vector<int64_t> order = shuffled(stream, {.seed = 5, .epoch = 1}, buffer);
    std::vector<int64_t> sorted = order;
    std::sort(sorted.begin(), sorted.end());
    CHECK(sorted == iota(0, 200));
    CHECK(order == shuffled(stream, {.seed = 5, .epoch = 1}, buffer));
    for (size_t t = 0; t < order.size(); ++t) CHECK(order[t] <= static_cast<int64_t>(t + buffer - 1));
    if (buffer == 1) {
      CHECK(order == iota(0, 200));
    } else {
      CHECK(order != iota(0, 200));
      CHECK(order != shuffled(stream, {.seed = 5, .epoch = 2}, buffer));
      CHECK(order != shuffled(stream, {.seed = 6, .epoch = 1}, buffer));
    }
  }
  CHECK(shuffled(stream, {.seed = 5}, 64, false) == iota(0, 200));
  // A bound in bytes holds fewer records: the same order as a buffer of that many.
  const size_t record_bytes = shuffled_record_bytes(stream);
  CHECK(shuffled(stream, {.seed = 5, .epoch = 1}, 1000, true, 7 * record_bytes) == shuffled(stream, {.seed = 5, .epoch = 1}, 7));
  CHECK(shuffled(stream, {.seed = 5, .epoch = 1}, 1000, true, 1) == iota(0, 200));
  CHECK(ShuffledRecords::open(stream, {0}, {}, {.records = 0}, true).status().message() ==
        stream.name() + ": a shuffle buffer holds at least one record");

  // Files are visited in an order drawn from (seed, epoch), each whole with a buffer of one.
  std::vector<std::string> files;
  for (int64_t f = 0; f < 6; ++f) files.push_back(scratch.records("shard" + std::to_string(f) + ".gz", 10 * f, 10));
  auto shards = tfrecord_source(files, kSpec);
  REQUIRE(shards.ok());
  std::set<std::vector<int64_t>> file_orders;
  for (int64_t epoch = 0; epoch < 4; ++epoch) {
    const std::vector<int64_t> order = shuffled(*shards->source->stream(), {.seed = 9, .epoch = epoch}, 1);
    std::vector<int64_t> file_order;
    for (size_t i = 0; i < order.size(); i += 10) {
      file_order.push_back(order[i] / 10);
      CHECK(std::vector<int64_t>(order.begin() + static_cast<long>(i), order.begin() + static_cast<long>(i) + 10) == iota(order[i], 10));
    }
    file_orders.insert(file_order);
  }
  CHECK(file_orders.size() > 1);
  CHECK(shuffled(*shards->source->stream(), {.seed = 9}, 1, false) == iota(0, 60));
}

std::vector<int64_t> batch_labels(const Batch& batch) {
  const Tensor& y = batch["labels"];
  return {y.data<int64_t>(), y.data<int64_t>() + batch.size};
}

// Every batch's labels of epoch `epoch` from `first_batch` on.
std::vector<std::vector<int64_t>> epoch_labels(const Dataset& data, int64_t epoch, int64_t first_batch = 0) {
  std::vector<std::vector<int64_t>> batches;
  auto batches_of = data.epoch(epoch, first_batch);
  while (true) {
    auto batch = batches_of.next();
    REQUIRE_MESSAGE(batch.ok(), batch.status().to_string());
    if (!*batch) break;
    const Tensor& x = (**batch)["inputs"];
    const std::vector<int64_t> labels = batch_labels(**batch);
    for (size_t i = 0; i < labels.size(); ++i) CHECK(x.data<double>()[3 * i + 2] == -static_cast<double>(labels[i]));
    batches.push_back(labels);
  }
  return batches;
}

TEST_CASE("Dataset.batches_a_stream_in_its_shuffled_order_sharded_resumed_and_prefetched") {
  const Scratch scratch;
  std::vector<std::string> files;
  for (int64_t f = 0; f < 3; ++f) files.push_back(scratch.records("part" + std::to_string(f) + ".gz", 20 * f, f == 2 ? 13 : 20));
  auto opened = tfrecord_source(files, kSpec);
  REQUIRE(opened.ok());
  const std::vector<Feed> feeds = {{.placeholder = "inputs", .field = "x", .dtype = graph::DType::f64},
                                   {.placeholder = "labels", .field = "y", .dtype = graph::DType::i64}};
  const auto make = [&](BatchingOptions options) {
    auto data = Dataset::create(opened->source, feeds, options);
    REQUIRE_MESSAGE(data.ok(), data.status().to_string());
    return std::move(*data);
  };
  const BatchingOptions base{.batch_size = 8, .seed = 4, .shuffle_buffer = 11};
  const Dataset whole = make(base);
  CHECK(whole.batches_per_epoch() == 7);
  for (int64_t epoch = 0; epoch < 2; ++epoch) {
    CAPTURE(epoch);
    const std::vector<std::vector<int64_t>> batches = epoch_labels(whole, epoch);
    std::vector<int64_t> flat;
    for (const auto& b : batches) flat.insert(flat.end(), b.begin(), b.end());
    CHECK(flat == shuffled(*opened->source->stream(), {.seed = 4, .epoch = epoch}, 11));
    CHECK(batches.back().size() == 5);
    // Resumed at batch 3, on the caller's thread or with more threads: the same batches.
    CHECK(epoch_labels(whole, epoch, 3) == std::vector<std::vector<int64_t>>(batches.begin() + 3, batches.end()));
    CHECK(epoch_labels(make({.batch_size = 8, .seed = 4, .prefetch = 0, .threads = 2, .shuffle_buffer = 11}), epoch) == batches);
    // Shards: each worker's rows of every global batch, together the global batch.
    for (const int64_t shards : {int64_t{2}, int64_t{3}}) {
      CAPTURE(shards);
      std::vector<std::vector<std::vector<int64_t>>> parts;
      for (int64_t shard = 0; shard < shards; ++shard) {
        BatchingOptions options = base;
        options.shard = shard;
        options.shards = shards;
        parts.push_back(epoch_labels(make(options), epoch));
      }
      for (size_t b = 0; b < batches.size(); ++b) {
        std::vector<int64_t> joined;
        for (const auto& part : parts) joined = concat(joined, part.at(b));
        CHECK(joined == batches[b]);
      }
    }
  }
  CHECK(epoch_labels(make({.batch_size = 8, .shuffle = false}), 0)[0] == iota(0, 8));
  CHECK(epoch_labels(make({.batch_size = 8, .seed = 4, .drop_remainder = true}), 0).size() == 6);
  CHECK(Dataset::create(opened->source, feeds, {.shuffle_buffer = 0}).status().message() == "a shuffle buffer holds at least one record");
  // A record that does not decode stops the epoch, naming its file, number and offset.
  const std::string odd = scratch.path("odd.gz");
  int64_t odd_offset = 0;
  {
    test::TfRecordWriter out(odd, true);
    for (int64_t y = 0; y < 6; ++y) {
      const float x[] = {0, 0, 0};
      const int64_t label[] = {y};
      test::TfExampleBuilder example;
      example.floats("x", x);
      if (y != 4) example.int64s("y", label);
      if (y < 4) odd_offset += static_cast<int64_t>(example.bytes().size() + kTfRecordHeaderBytes + kTfRecordFooterBytes);
      out.write(example.bytes());
    }
  }
  auto odd_source = tfrecord_source({odd}, kSpec);
  REQUIRE(odd_source.ok());
  auto odd_data = Dataset::create(odd_source->source, feeds, {.batch_size = 3, .shuffle = false});
  REQUIRE(odd_data.ok());
  auto odd_epoch = odd_data->epoch(0);
  CHECK(odd_epoch.next().ok());
  CHECK(odd_epoch.next().status().message() ==
        "TFRecord file '" + odd + "', record 4 at byte " + std::to_string(odd_offset) + " has no feature 'y' (its features: x)");
}

TEST_CASE("Dataset.shards_a_stream_by_file_each_worker_reading_its_own_files") {
  const Scratch scratch;
  // Five files of 10, 12, 9, 11 and 8 examples, labelled 100 * file + number.
  std::vector<std::string> files;
  const int64_t sizes[] = {10, 12, 9, 11, 8};
  for (int64_t f = 0; f < 5; ++f) files.push_back(scratch.records("f" + std::to_string(f) + ".gz", 100 * f, sizes[f]));
  auto opened = tfrecord_source(files, kSpec);
  REQUIRE(opened.ok());
  CHECK(opened->source->stream()->file_size(1) == 12);
  const std::vector<Feed> feeds = {{.placeholder = "inputs", .field = "x", .dtype = graph::DType::f64},
                                   {.placeholder = "labels", .field = "y", .dtype = graph::DType::i64}};
  const auto make = [&](int64_t shard, int64_t shards, ShardPolicy policy, int64_t batch = 8) {
    return Dataset::create(opened->source, feeds,
                           {.batch_size = batch, .seed = 2, .shuffle_buffer = 6, .shard = shard, .shards = shards, .shard_policy = policy});
  };
  for (const ShardPolicy policy : {ShardPolicy::file, ShardPolicy::automatic}) {
    std::vector<std::set<int64_t>> seen(2);
    for (int64_t shard = 0; shard < 2; ++shard) {
      CAPTURE(shard);
      auto data = make(shard, 2, policy);
      REQUIRE_MESSAGE(data.ok(), data.status().to_string());
      // Worker 0 reads files 0, 2, 4 (27 examples), worker 1 files 1, 3 (23): 5 batches of 4 each.
      CHECK(data->shard_files() == (shard == 0 ? std::vector<int64_t>{0, 2, 4} : std::vector<int64_t>{1, 3}));
      CHECK(data->batches_per_epoch() == 5);
      const std::vector<std::vector<int64_t>> batches = epoch_labels(*data, 0);
      REQUIRE(batches.size() == 5);
      for (const auto& batch : batches) {
        CHECK(batch.size() == 4);
        for (const int64_t label : batch) {
          CHECK((label / 100) % 2 == shard);
          CHECK(seen[static_cast<size_t>(shard)].insert(label).second);
        }
      }
      CHECK(epoch_labels(*data, 0, 2) == std::vector<std::vector<int64_t>>(batches.begin() + 2, batches.end()));
      CHECK(epoch_labels(*data, 1) != batches);
    }
  }
  // Fewer files than workers: AUTO shards by example, as one device reads; by file is refused.
  auto by_example = make(1, 6, ShardPolicy::automatic);
  REQUIRE(by_example.ok());
  CHECK(by_example->shard_files().empty());
  CHECK(by_example->batches_per_epoch() == 7);
  CHECK(make(1, 6, ShardPolicy::file).status().message() == opened->source->name() + ": 5 files cannot be dealt to 6 workers by file");
  CHECK(make(1, 2, ShardPolicy::file, 50).status().message() ==
        opened->source->name() + ": the files of worker 1 hold 23 examples, less than its share (25) of a batch of 50");
  auto plain = tfrecord_source({scratch.records("plain.tfrecord", 0, 10, false)}, {.features = kSpec.features});
  REQUIRE(plain.ok());
  CHECK(Dataset::create(plain->source, feeds, {.shard = 0, .shards = 2, .shard_policy = ShardPolicy::file}).status().message() ==
        plain->source->name() + " is read at random, so it shards by example (each worker reads only its own examples)");
  CHECK(Dataset::create(plain->source, feeds, {.shard = 0, .shards = 2, .shard_policy = ShardPolicy::automatic})->shard_files().empty());
}

}  // namespace
}  // namespace mirra::runtime::data
