// Memory planning and running out of memory: the liveness estimate against a hand count, the budget's
// error naming the largest tensors, and allocations that cannot be served ending the step with a
// resource_exhausted error that names the node, after which the session still works.
#include <doctest/doctest.h>

#include "ops/ops.h"
#include "runtime/memory_estimate.h"
#include "runtime/session.h"

namespace mirra::runtime {
namespace {

using graph::DType;

TEST_CASE("MemoryEstimate.counts_sources_and_the_most_values_alive_at_once") {
  graph::Graph g;
  graph::Builder b(g, ops::registry());
  const auto x = ops::placeholder(b, "x", DType::f32, {-1, 100});             // 400 B a row
  const auto w = ops::variable(b, "w", {100, 50});                            // 20,000 B
  const auto h = ops::relu(b, ops::matmul(b, x, w));                          // 200 B a row, twice
  const auto y = ops::reduce_sum(b, ops::tanh(b, h));                         // 200 B a row, then 4 B
  REQUIRE(b.status().ok());
  (void)y;
  const auto estimate = estimate_memory(g, 10);
  REQUIRE(estimate.ok());
  CHECK(estimate->source_bytes == 4000 + 20000);
  // MatMul's 2,000 B lives until Relu has made its 2,000 B; then Relu's until Tanh has made its own.
  CHECK(estimate->peak_bytes == 4000 + 20000 + 2000 + 2000);
  REQUIRE(estimate->largest.size() == 5);
  CHECK(estimate->largest[0].node == "w");
  CHECK(estimate->largest[0].bytes == 20000);
  CHECK(estimate->largest[1].node == "x");

  CHECK(check_memory_budget(*estimate, 28000).ok());
  const graph::Status over = check_memory_budget(*estimate, 27999);
  CHECK(over.code() == graph::StatusCode::resource_exhausted);
  CHECK(over.message().find("about 27.3 KiB") != std::string::npos);
  CHECK(over.message().find("largest tensors: w f32[100,50] 19.5 KiB, x f32[10,100] 3.9 KiB") != std::string::npos);
  CHECK(default_memory_limit() > 0);
}

TEST_CASE("MemoryEstimate.over_what_the_roots_need") {
  graph::Graph g;
  graph::Builder b(g, ops::registry());
  const auto x = ops::placeholder(b, "x", DType::f32, {-1, 100});       // 400 B a row
  const auto y = ops::reduce_sum(b, ops::relu(b, x));                   // 400 B a row, then 4 B
  const auto unread = ops::one_hot(b, ops::placeholder(b, "i", DType::i64, {-1}), int64_t{1} << 40);
  REQUIRE(b.status().ok());
  (void)unread;
  const graph::NodeId roots[] = {y.node};
  const auto estimate = estimate_memory(g, 10, roots);
  REQUIRE(estimate.ok());
  CHECK(estimate->source_bytes == 4000);
  CHECK(estimate->peak_bytes == 4000 + 4000 + 4);  // Relu's rows alive while the sum is made
  CHECK(estimate_memory(g, 10)->peak_bytes > (int64_t{1} << 40));
}

// A batch of token sequences [?, ?]: its sequence length bound by name, and every shape inferred again
// from the bound placeholders (a flattening Reshape to [-1] weighs what it holds, not one batch).
TEST_CASE("MemoryEstimate.binds_unknown_dims_by_name_and_infers_through_the_graph") {
  graph::Graph g;
  graph::Builder b(g, ops::registry());
  const auto tokens = ops::placeholder(b, "tokens", DType::i64, {-1, -1});
  const auto y = ops::reduce_sum(b, ops::one_hot(b, ops::reshape(b, tokens, {-1}), 1000));  // f32[B * T, 1000]
  REQUIRE(b.status().ok());
  const graph::NodeId roots[] = {y.node};
  // Without bindings every unknown dim is the batch, and the flattened tokens one batch.
  CHECK(estimate_memory(g, 4, roots)->largest[0].bytes == 4 * 1000 * 4);
  const auto bound = estimate_memory(g, {.batch_size = 4, .dims = {{"tokens:1", 64}}, .schemas = &ops::registry()}, roots);
  REQUIRE(bound.ok());
  CHECK(bound->source_bytes == 4 * 64 * 8);
  CHECK(bound->largest[0].node == "OneHot");
  CHECK(bound->largest[0].type.to_string() == "f32[256,1000]");
  CHECK(bound->largest[0].bytes == 4 * 64 * 1000 * 4);
  for (const char* wrong : {"tokens:0x", "tokens:2", "labels:1", "tokens"}) {
    CAPTURE(wrong);
    const auto refused = estimate_memory(g, {.batch_size = 4, .dims = {{wrong, 8}}}, roots);
    REQUIRE_FALSE(refused.ok());
    CHECK(refused.status().message().find("names no unknown dim of a placeholder (<placeholder>:<axis>)") != std::string::npos);
  }
}

TEST_CASE("MemoryEstimate.saturates_instead_of_wrapping") {
  graph::Graph g;
  graph::Builder b(g, ops::registry());
  for (int i = 0; i < 4; ++i) ops::variable(b, "v" + std::to_string(i), {int64_t{1} << 60});  // 2^62 B each
  const auto estimate = estimate_memory(g, 1);
  REQUIRE(estimate.ok());
  CHECK(estimate->peak_bytes == std::numeric_limits<int64_t>::max());
  CHECK_FALSE(check_memory_budget(*estimate, int64_t{1} << 62).ok());
}

// Under AddressSanitizer this needs allocator_may_return_null=1 (scripts/test.sh sets it).
TEST_CASE("Executor.out_of_memory.is_resource_exhausted_and_the_session_goes_on") {
  graph::Graph g;
  graph::Builder b(g, ops::registry());
  const auto indices = ops::placeholder(b, "indices", DType::i64, {-1});
  const auto huge = ops::one_hot(b, indices, int64_t{1} << 45);  // 128 TiB a row: no machine has it
  const auto small = ops::one_hot(b, indices, 3);
  REQUIRE(b.status().ok());
  Session session(g, ops::kernels());
  struct Case {
    int64_t rows;
    const char* why;
  };
  for (const Case c : {Case{1, "cpu:0: the system refused 128.0 TiB ("}, Case{3, "a tensor of f32[3,35184372088832] would have more than 2^48 bytes"},
                       Case{int64_t{1} << 17, "a tensor of f32[131072,35184372088832] would have more than 2^48 bytes"}}) {  // 2^64 bytes
    CAPTURE(c.rows);
    const auto failed = session.run(
        {{"indices", Tensor::from<int64_t>({c.rows}, std::vector<int64_t>(static_cast<size_t>(c.rows), 0))}}, {huge});
    REQUIRE_FALSE(failed.ok());
    CHECK(failed.status().code() == graph::StatusCode::resource_exhausted);
    CAPTURE(failed.status().message());
    CHECK(failed.status().message().find(std::string("(OneHot) on cpu:0: out of memory: ") + c.why) != std::string::npos);
  }
  const auto fine = session.run({{"indices", Tensor::from<int64_t>({2}, {0, 2})}}, {small});
  REQUIRE(fine.ok());
  CHECK((*fine)[0].to_vector<float>() == std::vector<float>{1, 0, 0, 0, 0, 1});
}

// What the estimate cannot see (here a batch dim padded by an amount known only at run time, with a
// batch of 2) the session's memory limit still holds: the step fails, naming the node and the limit,
// the blocks it cached are given back, and a step that fits runs.
TEST_CASE("Session.memory_limit.holds_what_the_estimate_cannot_see") {
  graph::Graph g;
  graph::Builder b(g, ops::registry());
  const auto x = ops::placeholder(b, "x", DType::f32, {-1, 1024});
  const auto padded = ops::pad(b, x, {int64_t{1} << 20, 0, 0, 0});  // f32[?,1024] to the estimate: 8 KiB at batch 2
  const auto small = ops::relu(b, x);
  REQUIRE(b.status().ok());
  const auto estimate = estimate_memory(g, 2);
  REQUIRE(estimate.ok());
  CHECK(estimate->peak_bytes < (int64_t{1} << 20));
  Session session(g, ops::kernels(), {.memory_limit = int64_t{64} << 20});
  const auto batch = Tensor::from<float>({2, 1024}, std::vector<float>(2048, 1.f));
  const auto failed = session.run({{"x", batch}}, {padded});  // 4 GiB, a 6 GiB size class
  REQUIRE_FALSE(failed.ok());
  CHECK(failed.status().code() == graph::StatusCode::resource_exhausted);
  CAPTURE(failed.status().message());
  CHECK(failed.status().message().find("(Pad) on cpu:0: out of memory: cpu:0: 6.0 GiB more would pass the memory limit of 64.0 MiB") !=
        std::string::npos);
  const auto fine = session.run({{"x", batch}}, {small});
  REQUIRE(fine.ok());
  CHECK((*fine)[0].num_elements() == 2048);
}

}  // namespace
}  // namespace mirra::runtime
