// inference_copies: which nodes are copied (those between a training-mode op and the roots), what the
// copies share (variables, placeholders, whatever the mode does not reach), the training attribute
// and collective groups of the copies, the ops left as they are, and what the copies compute.
#include <doctest/doctest.h>

#include <cmath>

#include "ops/ops.h"
#include "runtime/session.h"

namespace mirra::ops {
namespace {

using graph::DType;
using graph::ValueRef;

TEST_CASE("InferenceMode.copies_what_a_training_mode_op_reaches_and_shares_the_rest") {
  graph::Graph g;
  graph::Builder b(g, registry(), 1);
  const ValueRef x = placeholder(b, "x", DType::f32, {-1, 2, 2, 3});
  BatchNormalization bn;
  {
    auto scope = b.scope("bn");
    bn = batch_normalization(b, x, {.momentum = 0.5});
  }
  const ValueRef y = reduce_sum(b, relu(b, bn.y));
  const ValueRef peer = all_reduce(b, {y}, {.group = "metrics", .rank = 0, .ranks = 1})[0];
  const ValueRef untouched = reduce_sum(b, x);
  REQUIRE(b.status().ok());
  const size_t before = g.size();
  const ValueRef roots[] = {peer, untouched};
  auto copies = inference_copies(g, registry(), roots);
  REQUIRE_MESSAGE(copies.ok(), copies.status().to_string());
  CHECK((*copies)[1] == untouched);
  // The batch norm, the ReLU, the sum and the all-reduce: nothing else.
  CHECK(g.size() == before + 4);
  const graph::Node& all_reduce = g.node((*copies)[0].node);
  CHECK(all_reduce.name == "inference/" + g.node(peer.node).name);
  CHECK(*all_reduce.attrs.get<std::string>("group") == "inference/metrics");
  const graph::Node& normalised = g.node(*g.find("inference/" + g.node(bn.y.node).name));
  CHECK_FALSE(*normalised.attrs.get<bool>("is_training"));
  CHECK(*g.node(bn.y.node).attrs.get<bool>("is_training"));  // the training step's stays as it was
  CHECK(normalised.inputs == g.node(bn.y.node).inputs);         // x, gamma, beta and the moving statistics

  // The copy normalises with the moving statistics (0 and 1 before training): y = x / sqrt(1 + 1e-3).
  runtime::Session session(g, kernels());
  const runtime::Tensor batch = runtime::Tensor::from<float>({2, 2, 2, 3}, std::vector<float>(24, 2.0f));
  auto out = session.run({{"x", batch}}, {(*copies)[0], peer});
  REQUIRE_MESSAGE(out.ok(), out.status().to_string());
  CHECK((*out)[0].values<float>()[0] == doctest::Approx(24 * 2 / std::sqrt(1.001)).epsilon(1e-6));
  CHECK((*out)[1].values<float>()[0] == doctest::Approx(0.0).epsilon(1e-6));  // a constant batch: all at its mean
}

TEST_CASE("InferenceMode.leaves_an_op_without_an_inference_form_as_it_is") {
  graph::Graph g;
  graph::Builder b(g, registry(), 1);
  const ValueRef x = placeholder(b, "x", DType::f32, {-1, 2, 2, 3});
  const ValueRef ones = fill(b, {3}, 1.0), none = fill(b, {0}, 0.0);
  const ValueRef y = reduce_sum(b, fused_batch_norm(b, x, ones, ones, none, none).y);  // no statistics given
  REQUIRE(b.status().ok());
  const size_t before = g.size();
  const ValueRef roots[] = {y};
  auto copies = inference_copies(g, registry(), roots);
  REQUIRE(copies.ok());
  CHECK((*copies)[0] == y);
  CHECK(g.size() == before);
}

}  // namespace
}  // namespace mirra::ops
