// SplitBatch, AllReduce, ReduceScatter, Broadcast, AllGather, PeerAllReduce, PeerReduceScatter,
// PeerAllGather and DimSize against plain loops: TensorFlow's split rule (including empty shares),
// sums and means over replicas with every replica receiving the same bits (bf16 summed in f32 and
// rounded once), ranks of a PeerAllReduce, PeerReduceScatter or PeerAllGather on devices of their own
// meeting by group, each replica's share of the flattened sum, copies that each replica owns, gathers
// in replica order.
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

TEST_CASE("Kernels.AllReduce.sum_and_mean_over_replicas") {
  runtime::Random rng(4);
  for (const char* reduction : {"sum", "mean"}) {
    for (int replicas : {1, 2, 3}) {
      CAPTURE(reduction);
      CAPTURE(replicas);
      // Two tensors per replica, one big enough to span several chunks.
      const std::vector<TensorShape> shapes = {{3, 5}, {40000}};
      std::vector<Tensor> inputs, expected;
      for (int r = 0; r < replicas; ++r) {
        for (const TensorShape& shape : shapes) inputs.push_back(random_tensor<double>(rng, shape));
      }
      for (int r = 0; r < replicas; ++r) {
        for (size_t j = 0; j < shapes.size(); ++j) {
          expected.push_back(make_tensor(DType::f64, shapes[j], [&](int64_t i) {
            double sum = 0;
            for (int q = 0; q < replicas; ++q) sum += element(inputs[static_cast<size_t>(q) * shapes.size() + j], i);
            return std::string_view(reduction) == "mean" ? sum / replicas : sum;
          }));
        }
      }
      const AttrMap attrs = {{"replicas", int64_t{replicas}}, {"reduction", std::string(reduction)}};
      check_op("AllReduce", inputs, attrs, expected, 1e-12);
      auto out = run_op("AllReduce", inputs, attrs);
      REQUIRE(out.ok());
      for (int r = 1; r < replicas; ++r) {
        for (size_t j = 0; j < shapes.size(); ++j) {
          CHECK((*out)[static_cast<size_t>(r) * shapes.size() + j].to_vector<double>() == (*out)[j].to_vector<double>());
        }
      }
    }
  }
  // bf16 (compressed gradients): the inputs summed in f32 in replica order, rounded once, over a
  // tensor of several chunks; every replica receives the same bits.
  for (int replicas : {2, 3}) {
    CAPTURE(replicas);
    std::vector<Tensor> inputs;
    for (int r = 0; r < replicas; ++r) {
      const Tensor values = random_tensor<float>(rng, {70001});
      inputs.push_back(make_tensor(DType::bf16, {70001}, [&](int64_t i) { return element(values, i); }));
    }
    const Tensor sum = make_tensor(DType::bf16, {70001}, [&](int64_t i) {
      float total = static_cast<float>(element(inputs[0], i));
      for (int r = 1; r < replicas; ++r) total += static_cast<float>(element(inputs[static_cast<size_t>(r)], i));
      return static_cast<double>(total);
    });
    auto out = run_op("AllReduce", inputs, {{"replicas", int64_t{replicas}}});
    REQUIRE(out.ok());
    for (const Tensor& got : *out) {
      REQUIRE(got.dtype() == DType::bf16);
      CHECK(std::memcmp(got.raw_data(), sum.raw_data(), sum.byte_size()) == 0);
    }
  }
  // Shapes that disagree are an error at graph time, or at run time when the graph left them open.
  const std::vector<Tensor> mismatched = {Tensor::from<float>({2}, {1, 2}), Tensor::from<float>({3}, {1, 2, 3})};
  CHECK(run_op("AllReduce", mismatched, {{"replicas", int64_t{2}}}).status().message().find(
            "input 1 f32[3] does not match replica 0's f32[2]") != std::string::npos);
  CHECK(run_op("AllReduce", mismatched, {{"replicas", int64_t{2}}}, /*unknown_batch=*/true).status().message().find(
            "participant 1 holds f32[3] where participant 0 holds f32[2]") != std::string::npos);
  checked_ops().insert("AllReduce");
}

TEST_CASE("Kernels.ReduceScatter.each_replica_gets_its_share_of_the_sum") {
  runtime::Random rng(5);
  for (const char* reduction : {"sum", "mean"}) {
    // 7 elements over 3 replicas: shares of 3, 2 and 2; 2 over 3: 1, 1 and an empty share; 40,000
    // spans several chunks.
    for (const std::pair<TensorShape, int>& c : {std::pair{TensorShape{7}, 3}, std::pair{TensorShape{2}, 3},
                                                 std::pair{TensorShape{200, 200}, 2}, std::pair{TensorShape{3, 2}, 1}}) {
      const TensorShape shape = c.first;
      const int replicas = c.second;
      CAPTURE(reduction);
      CAPTURE(replicas);
      std::vector<Tensor> inputs, expected;
      for (int r = 0; r < replicas; ++r) inputs.push_back(random_tensor<double>(rng, shape));
      int64_t first = 0;
      for (int r = 0; r < replicas; ++r) {
        const int64_t share = ops::replica_share(inputs[0].num_elements(), replicas, r);
        expected.push_back(make_tensor(DType::f64, {share}, [&](int64_t i) {
          double sum = 0;
          for (const Tensor& input : inputs) sum += element(input, first + i);
          return std::string_view(reduction) == "mean" ? sum / replicas : sum;
        }));
        first += share;
      }
      check_op("ReduceScatter", inputs, {{"replicas", int64_t{replicas}}, {"reduction", std::string(reduction)}}, expected, 1e-12);
    }
  }
  // A bucket of two tensors per replica (replica r's j-th is input r * 2 + j): each cut on its own.
  const Tensor a0 = Tensor::from<float>({3}, {1, 2, 3}), b0 = Tensor::from<float>({1}, {10});
  const Tensor a1 = Tensor::from<float>({3}, {4, 5, 6}), b1 = Tensor::from<float>({1}, {20});
  check_op("ReduceScatter", {a0, b0, a1, b1}, {{"replicas", int64_t{2}}},
           {Tensor::from<float>({2}, {5, 7}), Tensor::from<float>({1}, {30}), Tensor::from<float>({1}, {9}),
            Tensor::from<float>({0}, {})},
           0);
  const std::vector<Tensor> mismatched = {Tensor::from<float>({2}, {1, 2}), Tensor::from<float>({3}, {1, 2, 3})};
  CHECK(run_op("ReduceScatter", mismatched, {{"replicas", int64_t{2}}}).status().message().find(
            "input 1 f32[3] does not match replica 0's f32[2]") != std::string::npos);
  CHECK(run_op("ReduceScatter", {Tensor::from<int32_t>({2}, {1, 2})}, {{"replicas", int64_t{1}}}).status().message().find(
            "reduce-scatter takes f32 or f64") != std::string::npos);
  CHECK(run_op("ReduceScatter", {a0, b0, a1}, {{"replicas", int64_t{2}}}).status().message().find(
            "the inputs do not divide into 2 replicas") != std::string::npos);
  checked_ops().insert("ReduceScatter");
}

// Rank r of buckets.size() devices of `kind`, each on device r, runs `collective` (a builder taking
// the bucket and the rank, as ops::peer_all_reduce does) on its bucket, fed buckets[r] (two tensors);
// returns rank r's output j at r * 2 + j.
template <class Communicator>
std::vector<Tensor> run_ranks(graph::DeviceKind kind, const std::vector<std::vector<Tensor>>& buckets, Communicator collective) {
  const int ranks = static_cast<int>(buckets.size());
  graph::Graph g;
  graph::Builder b(g, ops::registry());
  std::vector<graph::ValueRef> fetches;
  runtime::Feeds feeds;
  for (int r = 0; r < ranks; ++r) {
    b.set_device(graph::DeviceId{kind, r});
    std::vector<graph::ValueRef> bucket;
    for (size_t j = 0; j < 2; ++j) {
      const std::string name = "x" + std::to_string(r) + "_" + std::to_string(j);
      const Tensor& value = buckets[static_cast<size_t>(r)][j];
      const auto dims = value.shape().dims();
      bucket.push_back(ops::placeholder(b, name, value.dtype(), graph::Shape(std::vector<int64_t>(dims.begin(), dims.end()))));
      feeds[name] = value;
    }
    const auto outputs = collective(b, bucket, ops::PeerRank{.group = "bucket", .rank = r, .ranks = ranks}, "sum", ops::CollectiveOptions{});
    fetches.insert(fetches.end(), outputs.begin(), outputs.end());
  }
  REQUIRE(b.status().ok());
  runtime::Session session(g, ops::kernels(), {.threads = 2});
  auto out = session.run(feeds, fetches);
  REQUIRE_MESSAGE(out.ok(), out.status().to_string());
  return *out;
}

// One rank alone is the identity (its sum, or mean, of one); ranks on devices of their own meet by
// the group they name, each holding its own bucket in its own memory (staged through the host on
// cpu_async), and receive the same bits; a rank that never comes fails the others at the deadline.
TEST_CASE("Kernels.PeerAllReduce.ranks_meet_by_group") {
  runtime::Random rng(6);
  const std::vector<Tensor> alone = {random_tensor<double>(rng, {3, 4}), random_tensor<double>(rng, {40000})};
  for (const char* reduction : {"sum", "mean"}) {
    check_op("PeerAllReduce", alone,
             {{"group", std::string("g")}, {"rank", int64_t{0}}, {"ranks", int64_t{1}}, {"reduction", std::string(reduction)}},
             alone, 0);
  }
  checked_ops().insert("PeerAllReduce");

  for (graph::DeviceKind kind : {graph::DeviceKind::cpu, graph::DeviceKind::cpu_async}) {
    CAPTURE(graph::device_kind_name(kind));
    constexpr int kRanks = 3;
    std::vector<std::vector<Tensor>> buckets(kRanks);
    for (auto& bucket : buckets) bucket = {random_tensor<float>(rng, {5}), random_tensor<float>(rng, {70001})};
    const std::vector<Tensor> out = run_ranks(kind, buckets, ops::peer_all_reduce);
    for (size_t j = 0; j < 2; ++j) {
      const Tensor want = make_tensor(DType::f32, buckets[0][j].shape(), [&](int64_t i) {
        float sum = 0;
        for (const auto& bucket : buckets) sum += static_cast<float>(element(bucket[j], i));
        return static_cast<double>(sum);
      });
      for (int r = 0; r < kRanks; ++r) {
        const Tensor& got = out[static_cast<size_t>(r) * 2 + j];
        CHECK(std::memcmp(got.raw_data(), want.raw_data(), want.byte_size()) == 0);
      }
    }
  }

  // Rank 1's input fails its check: the step fails with that error at once, not at the deadline of
  // rank 0, which waits for a rank that will never come.
  for (bool deterministic : {false, true}) {
    CAPTURE(deterministic);
    graph::Graph g;
    graph::Builder b(g, ops::registry());
    std::vector<graph::ValueRef> sums;
    for (int r = 0; r < 2; ++r) {
      b.set_device(graph::DeviceId{graph::DeviceKind::cpu_async, r});
      auto x = ops::placeholder(b, "x" + std::to_string(r), DType::f32, {2});
      if (r == 1) x = ops::check_numerics(b, x, "rank 1's gradient");
      sums.push_back(ops::peer_all_reduce(b, {x}, {.group = "doomed", .rank = r, .ranks = 2})[0]);
    }
    REQUIRE(b.status().ok());
    runtime::Session session(g, ops::kernels(), {.deterministic = deterministic});
    const auto start = std::chrono::steady_clock::now();
    auto out = session.run({{"x0", Tensor::from<float>({2}, {1, 2})}, {"x1", Tensor::from<float>({2}, {NAN, 2})}}, sums);
    REQUIRE_FALSE(out.ok());
    CHECK(out.status().message().find("rank 1's gradient") != std::string::npos);
    CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(30));
  }

  // Rank 1 of 2 never comes: rank 0 fails at the deadline, naming the group.
  graph::Graph g;
  graph::Builder b(g, ops::registry());
  b.set_device(graph::DeviceId{graph::DeviceKind::cpu_async, 0});
  const auto x = ops::placeholder(b, "x", DType::f32, {2});
  const auto sum = ops::peer_all_reduce(b, {x}, {.group = "lonely", .rank = 0, .ranks = 2}, "sum", {.timeout_ms = 50});
  REQUIRE(b.status().ok());
  runtime::Session session(g, ops::kernels());
  auto out = session.run({{"x", Tensor::from<float>({2}, {1, 2})}}, {sum[0]});
  REQUIRE_FALSE(out.ok());
  CHECK(out.status().code() == graph::StatusCode::deadline_exceeded);
  CHECK(out.status().message().find("'lonely'") != std::string::npos);
}

// Each rank receives its share of each tensor's flattened sum, the shares in rank order and uneven
// (70001 elements over 3), bitwise what a plain loop summing in rank order gives.
TEST_CASE("Kernels.PeerReduceScatter.each_rank_gets_its_share") {
  runtime::Random rng(8);
  const std::vector<Tensor> alone = {random_tensor<double>(rng, {3, 4})};
  const std::vector<Tensor> flat = {Tensor::from<double>({12}, std::span<const double>(alone[0].to_vector<double>()))};
  check_op("PeerReduceScatter", alone, {{"group", std::string("g")}, {"rank", int64_t{0}}, {"ranks", int64_t{1}}}, flat, 0);
  checked_ops().insert("PeerReduceScatter");

  for (graph::DeviceKind kind : {graph::DeviceKind::cpu, graph::DeviceKind::cpu_async}) {
    CAPTURE(graph::device_kind_name(kind));
    constexpr int kRanks = 3;
    std::vector<std::vector<Tensor>> buckets(kRanks);
    for (auto& bucket : buckets) bucket = {random_tensor<float>(rng, {2, 5}), random_tensor<float>(rng, {70001})};
    const std::vector<Tensor> out = run_ranks(kind, buckets, ops::peer_reduce_scatter);
    for (size_t j = 0; j < 2; ++j) {
      const int64_t n = buckets[0][j].num_elements();
      int64_t first = 0;
      for (int r = 0; r < kRanks; ++r) {
        const int64_t share = runtime::participant_share(n, kRanks, r);
        const Tensor want = make_tensor(DType::f32, {share}, [&](int64_t i) {
          float sum = 0;
          for (const auto& bucket : buckets) sum += static_cast<float>(element(bucket[j], first + i));
          return static_cast<double>(sum);
        });
        const Tensor& got = out[static_cast<size_t>(r) * 2 + j];
        REQUIRE(got.shape() == want.shape());
        CHECK(std::memcmp(got.raw_data(), want.raw_data(), want.byte_size()) == 0);
        first += share;
      }
    }
  }
}

// Each rank brings its share of each tensor (uneven: 70001 elements over 3, and 2 over 3, where the
// last share is empty; even: 12 over 3) and receives every share joined in rank order, bitwise; a
// share of the wrong size is refused when the graph is built.
TEST_CASE("Kernels.PeerAllGather.joins_the_shares_in_rank_order") {
  runtime::Random rng(9);
  const std::vector<Tensor> alone = {random_tensor<double>(rng, {6})};
  check_op("PeerAllGather", alone,
           {{"group", std::string("g")}, {"rank", int64_t{0}}, {"ranks", int64_t{1}}, {"elements", std::vector<int64_t>{6}}},
           alone, 0);
  CHECK(run_op("PeerAllGather", alone,
               {{"group", std::string("g")}, {"rank", int64_t{1}}, {"ranks", int64_t{2}}, {"elements", std::vector<int64_t>{14}}})
            .status().message().find("input 0 f64[6] is not rank 1's share of 14 elements (7)") != std::string::npos);
  checked_ops().insert("PeerAllGather");

  for (graph::DeviceKind kind : {graph::DeviceKind::cpu, graph::DeviceKind::cpu_async}) {
    for (const std::vector<int64_t>& elements : {std::vector<int64_t>{70001, 2}, std::vector<int64_t>{12, 3}}) {
      CAPTURE(graph::device_kind_name(kind));
      CAPTURE(elements[0]);
      constexpr int kRanks = 3;
      const std::vector<Tensor> whole = {random_tensor<float>(rng, {elements[0]}), random_tensor<float>(rng, {elements[1]})};
      std::vector<std::vector<Tensor>> shares(kRanks);
      for (size_t j = 0; j < whole.size(); ++j) {
        int64_t first = 0;
        for (int r = 0; r < kRanks; ++r) {
          const int64_t share = runtime::participant_share(elements[j], kRanks, r);
          shares[static_cast<size_t>(r)].push_back(
              make_tensor(DType::f32, {share}, [&](int64_t i) { return element(whole[j], first + i); }));
          first += share;
        }
      }
      const auto gather = [&](graph::Builder& b, const std::vector<graph::ValueRef>& bucket, const ops::PeerRank& rank,
                              std::string_view, const ops::CollectiveOptions& options) {
        return ops::peer_all_gather(b, bucket, rank, elements, options);
      };
      const std::vector<Tensor> out = run_ranks(kind, shares, gather);
      for (int r = 0; r < kRanks; ++r) {
        for (size_t j = 0; j < whole.size(); ++j) {
          const Tensor& got = out[static_cast<size_t>(r) * 2 + j];
          REQUIRE(got.shape() == whole[j].shape());
          CHECK(std::memcmp(got.raw_data(), whole[j].raw_data(), whole[j].byte_size()) == 0);
        }
      }
    }
  }
}

TEST_CASE("Kernels.Broadcast_and_AllGather") {
  const Tensor x = make_tensor(DType::i32, {2, 3}, [](int64_t i) { return static_cast<double>(i * 3); });
  check_op("Broadcast", {x}, {{"replicas", int64_t{3}}}, {x, x, x});
  auto copies = run_op("Broadcast", {x}, {{"replicas", int64_t{2}}});
  REQUIRE(copies.ok());
  CHECK((*copies)[0].buffer() != (*copies)[1].buffer());  // each replica owns its copy
  checked_ops().insert("Broadcast");

  // Shares of 2, 0 and 1 rows: an empty share adds nothing.
  const Tensor a = make_tensor(DType::f32, {2, 2}, [](int64_t i) { return static_cast<double>(i); });
  const Tensor empty = make_tensor(DType::f32, {0, 2}, [](int64_t) { return 0.0; });
  const Tensor c = make_tensor(DType::f32, {1, 2}, [](int64_t i) { return static_cast<double>(10 + i); });
  const Tensor gathered = Tensor::from<float>({3, 2}, {0, 1, 2, 3, 10, 11});
  check_op("AllGather", {a, empty, c}, {{"replicas", int64_t{3}}}, {gathered, gathered, gathered});
  CHECK(run_op("AllGather", {a, make_tensor(DType::f32, {1, 3}, [](int64_t) { return 0.0; })}, {{"replicas", int64_t{2}}})
            .status().message().find("input 1 f32[1,3] does not stack with input 0") != std::string::npos);
  // A bucket of two tensors per replica: each gathered on its own.
  const Tensor v0 = Tensor::from<float>({1}, {7}), v1 = Tensor::from<float>({2}, {8, 9});
  const Tensor both = Tensor::from<float>({3}, {7, 8, 9});
  check_op("AllGather", {a, v0, c, v1}, {{"replicas", int64_t{2}}},
           {Tensor::from<float>({3, 2}, {0, 1, 2, 3, 10, 11}), both, Tensor::from<float>({3, 2}, {0, 1, 2, 3, 10, 11}), both});
  checked_ops().insert("AllGather");
}

// Every collective at every dtype its schema accepts: among the replicas of one node, and among three
// ranks on devices of their own (cpu and cpu_async), against sums and gathers in plain loops.
TEST_CASE("Kernels.collectives.at_every_dtype") {
  runtime::Random rng(10);
  const std::vector<TensorShape> shapes = {{3, 5}, {40000}};
  const auto sum_over = [](const std::vector<Tensor>& parts, size_t k, size_t j, int count, bool mean, int64_t offset,
                           const TensorShape& shape) {
    return make_tensor(parts[j].dtype(), shape, [&](int64_t i) {
      double sum = 0;
      for (int q = 0; q < count; ++q) sum += element(parts[static_cast<size_t>(q) * k + j], offset + i);
      return mean ? sum / count : sum;
    });
  };
  for (const char* reduction : {"sum", "mean"}) {
    const bool mean = std::string_view(reduction) == "mean";
    CAPTURE(reduction);
    check_op_at_every_dtype("AllReduce", [&](DType dtype) {
      std::vector<Tensor> inputs, expected;
      for (int r = 0; r < 2; ++r) {
        for (const TensorShape& shape : shapes) inputs.push_back(random_of(rng, dtype, shape, -4, 4));
      }
      for (int r = 0; r < 2; ++r) {
        for (size_t j = 0; j < shapes.size(); ++j) expected.push_back(sum_over(inputs, 2, j, 2, mean, 0, shapes[j]));
      }
      return OpCase{inputs, {{"replicas", int64_t{2}}, {"reduction", std::string(reduction)}}, expected};
    });
    check_op_at_every_dtype("ReduceScatter", [&](DType dtype) {
      const std::vector<Tensor> inputs = {random_of(rng, dtype, {7}, -4, 4), random_of(rng, dtype, {7}, -4, 4),
                                          random_of(rng, dtype, {7}, -4, 4)};
      std::vector<Tensor> expected;
      for (int64_t r = 0, first = 0; r < 3; first += ops::replica_share(7, 3, r), ++r) {
        expected.push_back(sum_over(inputs, 1, 0, 3, mean, first, {ops::replica_share(7, 3, r)}));
      }
      return OpCase{inputs, {{"replicas", int64_t{3}}, {"reduction", std::string(reduction)}}, expected};
    });
    // One rank alone: its sum (or mean) of one.
    check_op_at_every_dtype("PeerAllReduce", [&](DType dtype) {
      const std::vector<Tensor> alone = {random_of(rng, dtype, {3, 4}, -4, 4), random_of(rng, dtype, {40000}, -4, 4)};
      return OpCase{alone,
                    {{"group", std::string("g")}, {"rank", int64_t{0}}, {"ranks", int64_t{1}}, {"reduction", std::string(reduction)}},
                    alone};
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
    return OpCase{{x}, {{"replicas", int64_t{3}}}, {x, x, x}};
  });
  check_op_at_every_dtype("AllGather", [&](DType dtype) {
    const Tensor a = random_of(rng, dtype, {2, 2}, -4, 4), empty = random_of(rng, dtype, {0, 2}), c = random_of(rng, dtype, {1, 2}, -4, 4);
    const Tensor gathered = make_tensor(dtype, {3, 2}, [&](int64_t i) { return i < 4 ? element(a, i) : element(c, i - 4); });
    return OpCase{{a, empty, c}, {{"replicas", int64_t{3}}}, {gathered, gathered, gathered}};
  });
  check_op_at_every_dtype("PeerReduceScatter", [&](DType dtype) {
    const Tensor alone = random_of(rng, dtype, {3, 4}, -4, 4);
    return OpCase{{alone},
                  {{"group", std::string("g")}, {"rank", int64_t{0}}, {"ranks", int64_t{1}}},
                  {make_tensor(dtype, {12}, [&](int64_t i) { return element(alone, i); })}};
  });
  check_op_at_every_dtype("PeerAllGather", [&](DType dtype) {
    const Tensor alone = random_of(rng, dtype, {6}, -4, 4);
    return OpCase{{alone},
                  {{"group", std::string("g")}, {"rank", int64_t{0}}, {"ranks", int64_t{1}}, {"elements", std::vector<int64_t>{6}}},
                  {alone}};
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
    sweep_dtypes("PeerAllReduce", [&](DType dtype) { return rank_types(dtype, rank_0); }, [&](DType dtype) {
      const auto buckets = buckets_of(dtype);
      const std::vector<Tensor> out = run_ranks(kind, buckets, ops::peer_all_reduce);
      for (size_t j = 0; j < 2; ++j) {
        const Tensor want = make_tensor(dtype, buckets[0][j].shape(), [&](int64_t i) {
          double sum = 0;
          for (const auto& bucket : buckets) sum += element(bucket[j], i);
          return sum;
        });
        for (int r = 0; r < kRanks; ++r) check_elements(out[static_cast<size_t>(r) * 2 + j], want, dtype_tolerance(dtype));
      }
    });
    sweep_dtypes("PeerReduceScatter", [&](DType dtype) { return rank_types(dtype, rank_0); }, [&](DType dtype) {
      const auto buckets = buckets_of(dtype);
      const std::vector<Tensor> out = run_ranks(kind, buckets, ops::peer_reduce_scatter);
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
    gather_0.set("elements", elements);
    const auto share_types = [&](DType dtype) {
      return std::pair{std::vector<graph::TensorType>{{dtype, graph::Shape{runtime::participant_share(5, kRanks, 0)}},
                                                      {dtype, graph::Shape{runtime::participant_share(70001, kRanks, 0)}}},
                       gather_0};
    };
    sweep_dtypes("PeerAllGather", share_types, [&](DType dtype) {
      const std::vector<Tensor> whole = {random_of(rng, dtype, {5}, -4, 4), random_of(rng, dtype, {70001}, -4, 4)};
      std::vector<std::vector<Tensor>> shares(kRanks);
      for (size_t j = 0; j < whole.size(); ++j) {
        for (int64_t r = 0, first = 0; r < kRanks; first += runtime::participant_share(elements[j], kRanks, r), ++r) {
          shares[static_cast<size_t>(r)].push_back(make_tensor(
              dtype, {runtime::participant_share(elements[j], kRanks, r)}, [&](int64_t i) { return element(whole[j], first + i); }));
        }
      }
      const auto gather = [&](graph::Builder& b, const std::vector<graph::ValueRef>& bucket, const ops::PeerRank& rank,
                              std::string_view, const ops::CollectiveOptions& options) {
        return ops::peer_all_gather(b, bucket, rank, elements, options);
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
