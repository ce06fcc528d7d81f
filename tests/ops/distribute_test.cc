// SplitBatch, DimSize and the collectives (AllReduce, ReduceScatter, AllGather, Broadcast) against
// plain loops: TensorFlow's split rule (including empty shares); ranks meeting by group, on cpu devices,
// on cpu_async devices of their own (staged through the host) and on one cpu_async device whose memory
// they share, each receiving the same bits (sums in rank order; bf16 summed in f32 and rounded once),
// its share of the flattened sum, every rank's rows joined in rank order, or the root's value; the
// errors a rank's bad input or a missing rank give.
#include <chrono>
#include <cmath>
#include <cstring>

#include "runtime/collectives/communicator.h"
#include "tests/ops/op_test_util.h"

namespace mirra::test {
namespace {

TEST_CASE("Kernels.SplitBatch.shares_follow_tensorflows_rule") {
  for (const std::pair<int, int>& split : {std::pair{7, 3}, std::pair{2, 4}, std::pair{0, 2}, std::pair{8, 1}}) {
    const int batch = split.first, replicas = split.second;
    CAPTURE(batch);
    CAPTURE(replicas);
    const Tensor x = make_tensor(DType::f32, {batch, 2}, [](int64_t i) { return static_cast<double>(i); });
    std::vector<Tensor> expected;
    int64_t first = 0;
    for (int r = 0; r < replicas; ++r) {
      const int64_t share = batch / replicas + (r < batch % replicas ? 1 : 0);
      CHECK(share == ops::replica_share(batch, replicas, r));
      expected.push_back(make_tensor(DType::f32, {share, 2}, [&](int64_t i) { return static_cast<double>(first * 2 + i); }));
      first += share;
    }
    check_op("SplitBatch", {x}, {{"replicas", int64_t{replicas}}}, expected);
  }
  checked_ops().insert("SplitBatch");
}

// Rank r of buckets.size() ranks runs `collective` (a builder taking the bucket and the rank, as
// ops::all_reduce does) on its bucket, fed buckets[r]: on device r of `kind`, or with `shared` every
// rank on device 0 of `kind`, sharing its memory. Returns rank r's output j at r * k + j.
template <class Collective>
std::vector<Tensor> run_ranks(graph::DeviceKind kind, const std::vector<std::vector<Tensor>>& buckets, Collective collective,
                              bool shared = false) {
  const int ranks = static_cast<int>(buckets.size());
  graph::Graph g;
  graph::Builder b(g, ops::registry());
  std::vector<graph::ValueRef> fetches;
  runtime::Feeds feeds;
  for (int r = 0; r < ranks; ++r) {
    b.set_device(graph::DeviceId{kind, shared ? 0 : r});
    std::vector<graph::ValueRef> bucket;
    for (size_t j = 0; j < buckets[static_cast<size_t>(r)].size(); ++j) {
      const std::string name = "x" + std::to_string(r) + "_" + std::to_string(j);
      const Tensor& value = buckets[static_cast<size_t>(r)][j];
      const auto dims = value.shape().dims();
      bucket.push_back(ops::placeholder(b, name, value.dtype(), graph::Shape(std::vector<int64_t>(dims.begin(), dims.end()))));
      feeds[name] = value;
    }
    const auto outputs = collective(b, bucket, ops::CollectiveRank{.group = "bucket", .rank = r, .ranks = ranks, .shared_memory = shared});
    fetches.insert(fetches.end(), outputs.begin(), outputs.end());
  }
  REQUIRE(b.status().ok());
  runtime::Session session(g, ops::kernels(), {.threads = 2});
  auto out = session.run(feeds, fetches);
  REQUIRE_MESSAGE(out.ok(), out.status().to_string());
  return *out;
}

// Where ranks run: each on a cpu device, each on a cpu_async device of its own, all on one cpu_async
// device (shared memory).
struct Placement {
  graph::DeviceKind kind;
  bool shared;
};
const Placement kPlacements[] = {{graph::DeviceKind::cpu, false}, {graph::DeviceKind::cpu_async, false}, {graph::DeviceKind::cpu_async, true}};

const auto kAllReduceSum = [](graph::Builder& b, const std::vector<graph::ValueRef>& bucket, const ops::CollectiveRank& rank) {
  return ops::all_reduce(b, bucket, rank);
};

AttrMap alone_attrs() { return {{"group", std::string("g")}, {"rank", int64_t{0}}, {"ranks", int64_t{1}}}; }

// One rank alone is the identity (its sum, or mean, of one); ranks meet by the group they name, each
// holding its own bucket, and receive the sum (or mean) in rank order, the same bits on every rank.
TEST_CASE("Kernels.AllReduce.ranks_meet_by_group") {
  runtime::Random rng(6);
  const std::vector<Tensor> alone = {random_tensor<double>(rng, {3, 4}), random_tensor<double>(rng, {40000})};
  for (const char* reduction : {"sum", "mean"}) {
    AttrMap attrs = alone_attrs();
    attrs.set("reduction", std::string(reduction));
    check_op("AllReduce", alone, attrs, alone, 0);
  }
  checked_ops().insert("AllReduce");

  for (const Placement& where : kPlacements) {
    for (const char* reduction : {"sum", "mean"}) {
      for (int ranks : {1, 2, 3}) {
        CAPTURE(graph::device_kind_name(where.kind));
        CAPTURE(where.shared);
        CAPTURE(reduction);
        CAPTURE(ranks);
        const bool mean = std::string_view(reduction) == "mean";
        std::vector<std::vector<Tensor>> buckets(static_cast<size_t>(ranks));
        for (auto& bucket : buckets) bucket = {random_tensor<float>(rng, {5}), random_tensor<float>(rng, {70001})};
        const auto collective = [&](graph::Builder& b, const std::vector<graph::ValueRef>& bucket, const ops::CollectiveRank& rank) {
          return ops::all_reduce(b, bucket, rank, reduction);
        };
        const std::vector<Tensor> out = run_ranks(where.kind, buckets, collective, where.shared);
        for (size_t j = 0; j < 2; ++j) {
          const Tensor want = make_tensor(DType::f32, buckets[0][j].shape(), [&](int64_t i) {
            float sum = 0;
            for (const auto& bucket : buckets) sum += static_cast<float>(element(bucket[j], i));
            return static_cast<double>(mean ? sum / static_cast<float>(ranks) : sum);
          });
          for (int r = 0; r < ranks; ++r) check_elements(out[static_cast<size_t>(r) * 2 + j], want, mean ? 1e-6 : 0);
          for (int r = 1; r < ranks; ++r) {
            CHECK(std::memcmp(out[static_cast<size_t>(r) * 2 + j].raw_data(), out[j].raw_data(), want.byte_size()) == 0);
          }
        }
      }
    }
  }
  // bf16 (compressed gradients): the inputs summed in f32 in rank order, rounded once, over a tensor of
  // several chunks; every rank receives the same bits.
  for (int ranks : {2, 3}) {
    CAPTURE(ranks);
    std::vector<std::vector<Tensor>> buckets;
    for (int r = 0; r < ranks; ++r) {
      const Tensor values = random_tensor<float>(rng, {70001});
      buckets.push_back({make_tensor(DType::bf16, {70001}, [&](int64_t i) { return element(values, i); })});
    }
    const Tensor sum = make_tensor(DType::bf16, {70001}, [&](int64_t i) {
      float total = static_cast<float>(element(buckets[0][0], i));
      for (int r = 1; r < ranks; ++r) total += static_cast<float>(element(buckets[static_cast<size_t>(r)][0], i));
      return static_cast<double>(total);
    });
    for (const Tensor& got : run_ranks(graph::DeviceKind::cpu, buckets, kAllReduceSum)) {
      REQUIRE(got.dtype() == DType::bf16);
      CHECK(std::memcmp(got.raw_data(), sum.raw_data(), sum.byte_size()) == 0);
    }
  }
}

// A rank's bad input fails the step at once, not at the deadline of the ranks waiting for it; shapes
// that disagree between ranks are named; a rank that never comes fails the others at the deadline.
TEST_CASE("Kernels.AllReduce.errors_name_the_rank_and_the_group") {
  for (const Placement& where : kPlacements) {
    for (bool deterministic : {false, true}) {
      CAPTURE(graph::device_kind_name(where.kind));
      CAPTURE(where.shared);
      CAPTURE(deterministic);
      graph::Graph g;
      graph::Builder b(g, ops::registry());
      std::vector<graph::ValueRef> sums;
      for (int r = 0; r < 2; ++r) {
        b.set_device(graph::DeviceId{where.kind, where.shared ? 0 : r});
        auto x = ops::placeholder(b, "x" + std::to_string(r), DType::f32, {2});
        if (r == 1) x = ops::check_numerics(b, x, "rank 1's gradient");
        sums.push_back(ops::all_reduce(b, {x}, {.group = "doomed", .rank = r, .ranks = 2, .shared_memory = where.shared})[0]);
      }
      REQUIRE(b.status().ok());
      runtime::Session session(g, ops::kernels(), {.deterministic = deterministic});
      const auto start = std::chrono::steady_clock::now();
      auto out = session.run({{"x0", Tensor::from<float>({2}, {1, 2})}, {"x1", Tensor::from<float>({2}, {NAN, 2})}}, sums);
      REQUIRE_FALSE(out.ok());
      CHECK(out.status().message().find("rank 1's gradient") != std::string::npos);
      CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(30));
    }
  }
  {
    graph::Graph g;
    graph::Builder b(g, ops::registry());
    std::vector<graph::ValueRef> sums;
    for (int r = 0; r < 2; ++r) {
      sums.push_back(ops::all_reduce(b, {ops::placeholder(b, "x" + std::to_string(r), DType::f32, {-1})}, {.group = "g", .rank = r, .ranks = 2})[0]);
    }
    runtime::Session session(g, ops::kernels());
    auto out = session.run({{"x0", Tensor::from<float>({2}, {1, 2})}, {"x1", Tensor::from<float>({3}, {1, 2, 3})}}, sums);
    REQUIRE_FALSE(out.ok());
    CHECK(out.status().message().find("participant 1 holds f32[3] where participant 0 holds f32[2]") != std::string::npos);
  }
  graph::Graph g;
  graph::Builder b(g, ops::registry());
  b.set_device(graph::DeviceId{graph::DeviceKind::cpu_async, 0});
  const auto x = ops::placeholder(b, "x", DType::f32, {2});
  const auto sum = ops::all_reduce(b, {x}, {.group = "lonely", .rank = 0, .ranks = 2}, "sum", {.timeout_ms = 50});
  REQUIRE(b.status().ok());
  runtime::Session session(g, ops::kernels());
  auto out = session.run({{"x", Tensor::from<float>({2}, {1, 2})}}, {sum[0]});
  REQUIRE_FALSE(out.ok());
  CHECK(out.status().code() == graph::StatusCode::deadline_exceeded);
  CHECK(out.status().message().find("'lonely'") != std::string::npos);
}

// A run that fetches one rank's sum runs every rank of its group (the others would wait for it).
TEST_CASE("Kernels.AllReduce.fetching_one_rank_runs_its_whole_group") {
  graph::Graph g;
  graph::Builder b(g, ops::registry());
  std::vector<graph::ValueRef> sums;
  for (int r = 0; r < 3; ++r) {
    const auto x = ops::mul(b, ops::placeholder(b, "x" + std::to_string(r), DType::f32, {2}), ops::scalar(b, 1.0f));
    sums.push_back(ops::all_reduce(b, {x}, {.group = "g", .rank = r, .ranks = 3}, "sum", {.timeout_ms = 20'000})[0]);
  }
  REQUIRE(b.status().ok());
  runtime::Session session(g, ops::kernels(), {.threads = 2});
  const runtime::Feeds feeds = {{"x0", Tensor::from<float>({2}, {1, 2})},
                                {"x1", Tensor::from<float>({2}, {10, 20})},
                                {"x2", Tensor::from<float>({2}, {100, 200})}};
  for (int step = 0; step < 2; ++step) {
    auto out = session.run(feeds, {sums[1]});
    REQUIRE_MESSAGE(out.ok(), out.status().to_string());
    CHECK((*out)[0].to_vector<float>() == std::vector<float>{111, 222});
  }
}

// Each rank receives its share of each tensor's flattened sum (or mean), the shares in rank order and
// uneven (7 over 3: 3, 2, 2; 2 over 3: an empty last share; 70001 over 3), bitwise what a plain loop
// summing in rank order gives.
TEST_CASE("Kernels.ReduceScatter.each_rank_gets_its_share") {
  runtime::Random rng(8);
  const std::vector<Tensor> alone = {random_tensor<double>(rng, {3, 4})};
  const std::vector<Tensor> flat = {Tensor::from<double>({12}, std::span<const double>(alone[0].to_vector<double>()))};
  check_op("ReduceScatter", alone, alone_attrs(), flat, 0);
  CHECK(run_op("ReduceScatter", {Tensor::from<int32_t>({2}, {1, 2})}, alone_attrs()).status().message().find(
            "reduce-scatter takes f32 or f64") != std::string::npos);
  checked_ops().insert("ReduceScatter");

  for (const Placement& where : kPlacements) {
    for (const char* reduction : {"sum", "mean"}) {
      CAPTURE(graph::device_kind_name(where.kind));
      CAPTURE(where.shared);
      CAPTURE(reduction);
      const bool mean = std::string_view(reduction) == "mean";
      constexpr int kRanks = 3;
      std::vector<std::vector<Tensor>> buckets(kRanks);
      for (auto& bucket : buckets) {
        bucket = {random_tensor<float>(rng, {7}), random_tensor<float>(rng, {2}), random_tensor<float>(rng, {70001})};
      }
      const auto collective = [&](graph::Builder& b, const std::vector<graph::ValueRef>& bucket, const ops::CollectiveRank& rank) {
        return ops::reduce_scatter(b, bucket, rank, reduction);
      };
      const std::vector<Tensor> out = run_ranks(where.kind, buckets, collective, where.shared);
      for (size_t j = 0; j < 3; ++j) {
        const int64_t n = buckets[0][j].num_elements();
        int64_t first = 0;
        for (int r = 0; r < kRanks; ++r) {
          const int64_t share = runtime::participant_share(n, kRanks, r);
          const Tensor want = make_tensor(DType::f32, {share}, [&](int64_t i) {
            float sum = 0;
            for (const auto& bucket : buckets) sum += static_cast<float>(element(bucket[j], first + i));
            return static_cast<double>(mean ? sum / kRanks : sum);
          });
          const Tensor& got = out[static_cast<size_t>(r) * 3 + j];
          REQUIRE(got.shape() == want.shape());
          check_elements(got, want, mean ? 1e-6 : 0);
          first += share;
        }
      }
    }
  }
}

// Each rank brings its rows of each tensor (uneven: 70001 over 3, 2 over 3 where the last part is
// empty; even: 12 over 3; rows of two columns) and receives every rank's joined in rank order,
// bitwise; a part of the wrong size is refused when the graph is built.
TEST_CASE("Kernels.AllGather.joins_the_parts_in_rank_order") {
  runtime::Random rng(9);
  const std::vector<Tensor> alone = {random_tensor<double>(rng, {6})};
  AttrMap attrs = alone_attrs();
  attrs.set("rows", std::vector<int64_t>{6});
  check_op("AllGather", alone, attrs, alone, 0);
  AttrMap second = attrs;
  second.set("rank", int64_t{1});
  second.set("ranks", int64_t{2});
  second.set("rows", std::vector<int64_t>{14});
  CHECK(run_op("AllGather", alone, second).status().message().find("input 0 f64[6] is not this rank's 7 rows of 14") !=
        std::string::npos);
  checked_ops().insert("AllGather");

  for (const Placement& where : kPlacements) {
    for (const std::vector<int64_t>& rows : {std::vector<int64_t>{70001, 2, 5}, std::vector<int64_t>{12, 3, 6}}) {
      CAPTURE(graph::device_kind_name(where.kind));
      CAPTURE(where.shared);
      CAPTURE(rows[0]);
      constexpr int kRanks = 3;
      const std::vector<Tensor> whole = {random_tensor<float>(rng, {rows[0]}), random_tensor<float>(rng, {rows[1]}),
                                         random_tensor<float>(rng, {rows[2], 2})};
      std::vector<std::vector<Tensor>> parts(kRanks);
      for (size_t j = 0; j < whole.size(); ++j) {
        const int64_t columns = j == 2 ? 2 : 1;
        int64_t first = 0;
        for (int r = 0; r < kRanks; ++r) {
          const int64_t share = runtime::participant_share(rows[j], kRanks, r);
          const TensorShape shape = j == 2 ? TensorShape{share, 2} : TensorShape{share};
          parts[static_cast<size_t>(r)].push_back(make_tensor(DType::f32, shape, [&](int64_t i) { return element(whole[j], first * columns + i); }));
          first += share;
        }
      }
      const auto gather = [&](graph::Builder& b, const std::vector<graph::ValueRef>& bucket, const ops::CollectiveRank& rank) {
        return ops::all_gather(b, bucket, rank, rows);
      };
      const std::vector<Tensor> out = run_ranks(where.kind, parts, gather, where.shared);
      for (int r = 0; r < kRanks; ++r) {
        for (size_t j = 0; j < whole.size(); ++j) {
          const Tensor& got = out[static_cast<size_t>(r) * 3 + j];
          REQUIRE(got.shape() == whole[j].shape());
          CHECK(std::memcmp(got.raw_data(), whole[j].raw_data(), whole[j].byte_size()) == 0);
        }
      }
    }
  }
}

// Every rank receives the root's value in a buffer of its own.
TEST_CASE("Kernels.Broadcast.every_rank_receives_the_roots_value") {
  const Tensor x = make_tensor(DType::i32, {2, 3}, [](int64_t i) { return static_cast<double>(i * 3); });
  check_op("Broadcast", {x}, alone_attrs(), {x});
  checked_ops().insert("Broadcast");

  for (const Placement& where : kPlacements) {
    for (int64_t root : {0, 2}) {
      CAPTURE(graph::device_kind_name(where.kind));
      CAPTURE(where.shared);
      CAPTURE(root);
      std::vector<std::vector<Tensor>> values;
      for (int r = 0; r < 3; ++r) values.push_back({make_tensor(DType::f32, {2, 3}, [&](int64_t i) { return 10.0 * r + i; })});
      const auto collective = [&](graph::Builder& b, const std::vector<graph::ValueRef>& bucket, const ops::CollectiveRank& rank) {
        return std::vector<graph::ValueRef>{ops::broadcast(b, bucket[0], rank, root)};
      };
      const std::vector<Tensor> out = run_ranks(where.kind, values, collective, where.shared);
      for (int r = 0; r < 3; ++r) {
        check_elements(out[static_cast<size_t>(r)], values[static_cast<size_t>(root)][0], 0);
        if (r > 0) CHECK(out[static_cast<size_t>(r)].buffer() != out[0].buffer());
      }
    }
  }
}

// Every collective at every dtype its schema accepts: one rank alone, and three ranks on devices of
// their own (cpu and cpu_async), against sums and gathers in plain loops.
TEST_CASE("Kernels.collectives.at_every_dtype") {
  runtime::Random rng(10);
  for (const char* reduction : {"sum", "mean"}) {
    CAPTURE(reduction);
    check_op_at_every_dtype("AllReduce", [&](DType dtype) {
      const std::vector<Tensor> alone = {random_of(rng, dtype, {3, 4}, -4, 4), random_of(rng, dtype, {40000}, -4, 4)};
      AttrMap attrs = alone_attrs();
      attrs.set("reduction", std::string(reduction));
      return OpCase{alone, attrs, alone};
    });
  }
  check_op_at_every_dtype("SplitBatch", [&](DType dtype) {
    const Tensor x = random_of(rng, dtype, {7, 2}, -4, 4);
    std::vector<Tensor> expected;
    for (int64_t r = 0, first = 0; r < 3; first += ops::replica_share(7, 3, r), ++r) {
      expected.push_back(make_tensor(dtype, {ops::replica_share(7, 3, r), 2}, [&](int64_t i) { return element(x, first * 2 + i); }));
    }
    return OpCase{{x}, {{"replicas", int64_t{3}}}, expected};
  });
  check_op_at_every_dtype("Broadcast", [&](DType dtype) {
    const Tensor x = random_of(rng, dtype, {2, 3}, -4, 4);
    return OpCase{{x}, alone_attrs(), {x}};
  });
  check_op_at_every_dtype("ReduceScatter", [&](DType dtype) {
    const Tensor alone = random_of(rng, dtype, {3, 4}, -4, 4);
    return OpCase{{alone}, alone_attrs(), {make_tensor(dtype, {12}, [&](int64_t i) { return element(alone, i); })}};
  });
  check_op_at_every_dtype("AllGather", [&](DType dtype) {
    const Tensor alone = random_of(rng, dtype, {6, 2}, -4, 4);
    AttrMap attrs = alone_attrs();
    attrs.set("rows", std::vector<int64_t>{6});
    return OpCase{{alone}, attrs, {alone}};
  });

  // Three ranks meeting by group, each on a device of its own.
  constexpr int kRanks = 3;
  const std::vector<int64_t> elements = {5, 70001};
  const auto rank_types = [&](DType dtype, const AttrMap& attrs) {
    return std::pair{std::vector<graph::TensorType>{{dtype, graph::Shape{5}}, {dtype, graph::Shape{70001}}}, attrs};
  };
  const AttrMap rank_0 = {{"group", std::string("g")}, {"rank", int64_t{0}}, {"ranks", int64_t{kRanks}}};
  const auto buckets_of = [&](DType dtype) {
    std::vector<std::vector<Tensor>> buckets(kRanks);
    for (auto& bucket : buckets) bucket = {random_of(rng, dtype, {5}, -4, 4), random_of(rng, dtype, {70001}, -4, 4)};
    return buckets;
  };
  for (graph::DeviceKind kind : {graph::DeviceKind::cpu, graph::DeviceKind::cpu_async}) {
    CAPTURE(graph::device_kind_name(kind));
    sweep_dtypes("AllReduce", [&](DType dtype) { return rank_types(dtype, rank_0); }, [&](DType dtype) {
      const auto buckets = buckets_of(dtype);
      const std::vector<Tensor> out = run_ranks(kind, buckets, kAllReduceSum);
      for (size_t j = 0; j < 2; ++j) {
        const Tensor want = make_tensor(dtype, buckets[0][j].shape(), [&](int64_t i) {
          double sum = 0;
          for (const auto& bucket : buckets) sum += element(bucket[j], i);
          return sum;
        });
        for (int r = 0; r < kRanks; ++r) check_elements(out[static_cast<size_t>(r) * 2 + j], want, dtype_tolerance(dtype));
      }
    });
    sweep_dtypes("ReduceScatter", [&](DType dtype) { return rank_types(dtype, rank_0); }, [&](DType dtype) {
      const auto buckets = buckets_of(dtype);
      const auto scatter = [](graph::Builder& b, const std::vector<graph::ValueRef>& bucket, const ops::CollectiveRank& rank) {
        return ops::reduce_scatter(b, bucket, rank);
      };
      const std::vector<Tensor> out = run_ranks(kind, buckets, scatter);
      for (size_t j = 0; j < 2; ++j) {
        for (int64_t r = 0, first = 0; r < kRanks; first += runtime::participant_share(elements[j], kRanks, r), ++r) {
          const Tensor want = make_tensor(dtype, {runtime::participant_share(elements[j], kRanks, r)}, [&](int64_t i) {
            double sum = 0;
            for (const auto& bucket : buckets) sum += element(bucket[j], first + i);
            return sum;
          });
          check_elements(out[static_cast<size_t>(r) * 2 + j], want, dtype_tolerance(dtype));
        }
      }
    });
    AttrMap gather_0 = rank_0;
    gather_0.set("rows", elements);
    const auto share_types = [&](DType dtype) {
      return std::pair{std::vector<graph::TensorType>{{dtype, graph::Shape{runtime::participant_share(5, kRanks, 0)}},
                                                      {dtype, graph::Shape{runtime::participant_share(70001, kRanks, 0)}}},
                       gather_0};
    };
    sweep_dtypes("AllGather", share_types, [&](DType dtype) {
      const std::vector<Tensor> whole = {random_of(rng, dtype, {5}, -4, 4), random_of(rng, dtype, {70001}, -4, 4)};
      std::vector<std::vector<Tensor>> shares(kRanks);
      for (size_t j = 0; j < whole.size(); ++j) {
        for (int64_t r = 0, first = 0; r < kRanks; first += runtime::participant_share(elements[j], kRanks, r), ++r) {
          shares[static_cast<size_t>(r)].push_back(make_tensor(
              dtype, {runtime::participant_share(elements[j], kRanks, r)}, [&](int64_t i) { return element(whole[j], first + i); }));
        }
      }
      const auto gather = [&](graph::Builder& b, const std::vector<graph::ValueRef>& bucket, const ops::CollectiveRank& rank) {
        return ops::all_gather(b, bucket, rank, elements);
      };
      const std::vector<Tensor> out = run_ranks(kind, shares, gather);
      for (int r = 0; r < kRanks; ++r) {
        for (size_t j = 0; j < whole.size(); ++j) check_elements(out[static_cast<size_t>(r) * 2 + j], whole[j], 0);
      }
    });
  }
  check_op_at_every_dtype("DimSize", [&](DType dtype) {
    return OpCase{{random_of(rng, dtype, {4, 0, 3})}, {{"axis", int64_t{-1}}}, {Tensor::scalar<int64_t>(3)}};
  });
}

TEST_CASE("Kernels.DimSize") {
  const Tensor x = make_tensor(DType::f32, {4, 0, 3}, [](int64_t) { return 0.0; });
  check_op("DimSize", {x}, {{"axis", int64_t{0}}}, {Tensor::scalar<int64_t>(4)});
  check_op("DimSize", {x}, {{"axis", int64_t{-1}}}, {Tensor::scalar<int64_t>(3)});
  check_op("DimSize", {x}, {{"axis", int64_t{1}}}, {Tensor::scalar<int64_t>(0)});
  checked_ops().insert("DimSize");
}

}  // namespace
}  // namespace mirra::test
