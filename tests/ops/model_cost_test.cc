// forward_cost: a convolution's multiply-adds are its outputs times kernel area times input channels
// (strided, SAME, NCHW), a matrix product's its outputs times the shared dim (transposed too), per
// example whatever the batch; nodes the roots do not need are not counted; unknown shapes are an error.
#include "ops/model_cost.h"
#include "tests/ops/op_test_util.h"

namespace mirra::test {
namespace {

TEST_CASE("ForwardCost.counts_the_products_of_what_the_roots_need") {
  graph::Graph g;
  graph::Builder b(g, ops::registry());
  auto images = ops::placeholder(b, "images", DType::f32, {-1, 9, 9, 3});
  auto filter = ops::variable(b, "filter", {5, 5, 3, 16}, ops::Initializer::zeros());
  auto y = ops::conv2d(b, images, filter, {.strides = {2, 2}, .padding = "SAME"});  // [?, 5, 5, 16]
  auto nchw = ops::placeholder(b, "nchw", DType::f32, {-1, 3, 9, 9});
  auto z = ops::conv2d(b, nchw, filter, {.padding = "VALID", .data_format = "NCHW"});  // [?, 16, 5, 5]
  auto flat = ops::reshape(b, ops::add(b, y, ops::transpose(b, z, {0, 2, 3, 1})), {-1, 400});
  auto w = ops::variable(b, "w", {10, 400}, ops::Initializer::zeros());
  auto logits = ops::matmul(b, flat, w, false, true);  // [?, 10], shared dim 400
  auto unused = ops::matmul(b, flat, ops::variable(b, "v", {400, 7}, ops::Initializer::zeros()));
  REQUIRE(b.status().ok());
  auto cost = ops::forward_cost(g, std::span(&logits.node, 1), ops::registry());
  REQUIRE_MESSAGE(cost.ok(), cost.status().to_string());
  CHECK(cost->multiply_adds == 2 * (5 * 5 * 16) * (5 * 5 * 3) + 10 * 400);
  CHECK(cost->convolutions == 2);
  CHECK(cost->matrix_products == 1);
  auto both = ops::forward_cost(g, std::vector<graph::NodeId>{logits.node, unused.node}, ops::registry());
  CHECK(both->multiply_adds == cost->multiply_adds + 7 * 400);

  graph::Graph h;
  graph::Builder c(h, ops::registry());
  auto x = ops::placeholder(c, "x", DType::f32, {-1, -1});
  auto product = ops::matmul(c, x, ops::placeholder(c, "m", DType::f32, {-1, 3}));
  CHECK(ops::forward_cost(h, std::span(&product.node, 1), ops::registry()).status().message() ==
        "forward cost: the shapes of 'MatMul' (MatMul) stay unknown at one example");
}

}  // namespace
}  // namespace mirra::test
