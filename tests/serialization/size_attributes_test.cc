// Every attribute that sizes an output, given a value whose sizes overflow int64 (or are negative), is
// refused when the model file loads, with an error naming the node and what is wrong; the same rules
// hold for graphs built with the C++ API. Together with the memory budget this keeps the promise that
// no allocation is sized by an unchecked number (docs/file-format.md).
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <limits>

#include "ops/ops.h"
#include "runtime/session.h"
#include "serialization/model_file.h"
#include "tests/serialization/tiny_model.h"

namespace mirra::serialization {
namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
using List = std::vector<int64_t>;

struct Case {
  const char* what;
  std::function<graph::ValueRef(graph::Builder&, graph::ValueRef images, graph::ValueRef labels)> add;  // with sane attrs
  const char* attr;
  graph::AttrValue hostile;
  const char* message;  // a part of the error
};

graph::Status load_with(const Case& c) {
  Model model = testing::tiny_model();
  graph::Builder b(model.graph, ops::registry());
  const graph::ValueRef images{*model.graph.find("images"), 0};
  const graph::ValueRef labels{*model.graph.find("labels"), 0};
  const graph::ValueRef added = c.add(b, images, labels);
  REQUIRE(b.status().ok());
  model.graph.mutable_node(added.node).attrs.set(c.attr, c.hostile);
  auto bytes = serialize_model(model);
  REQUIRE(bytes.ok());
  return parse_model({bytes->data(), bytes->size()}, ops::registry(), "crafted").status();
}

TEST_CASE("ModelFile.malformed.size_attributes_that_overflow") {
  const Case cases[] = {
      {"one-hot depth 2^62", [](auto& b, auto, auto labels) { return ops::one_hot(b, labels, 10); }, "depth",
       int64_t{1} << 62, "depth 4611686018427387904 makes the output f32[?,4611686018427387904] overflow int64 bytes"},
      {"one-hot depth 2^61 (f32: 2^63 bytes)", [](auto& b, auto, auto labels) { return ops::one_hot(b, labels, 10); }, "depth",
       int64_t{1} << 61, "overflow int64 bytes"},
      {"negative one-hot depth", [](auto& b, auto, auto labels) { return ops::one_hot(b, labels, 10); }, "depth", int64_t{-3},
       "depth must be non-negative"},
      {"padding that would wrap a dim", [](auto& b, auto images, auto) { return ops::pad(b, images, {0, 0, 1, 1, 1, 1, 0, 0}); },
       "paddings", List{0, 0, 0, kMax - 1, 0, 0, 0, 0}, "paddings must be in [0, 2^31]"},
      {"padding of the batch dim beyond 2^31", [](auto& b, auto images, auto) { return ops::pad(b, images, {0, 0, 1, 1, 1, 1, 0, 0}); },
       "paddings", List{(int64_t{1} << 31) + 1, 0, 0, 0, 0, 0, 0, 0}, "paddings must be in [0, 2^31]"},
      {"paddings that make a row too big", [](auto& b, auto images, auto) { return ops::pad(b, images, {0, 0, 1, 1, 1, 1, 0, 0}); },
       "paddings", List{0, 0, int64_t{1} << 31, int64_t{1} << 31, int64_t{1} << 31, int64_t{1} << 31, 0, 0},
       "more bytes than a 64-bit size counts"},
      {"slice past the end of a known dim", [](auto& b, auto images, auto) { return ops::slice(b, images, {0, 0, 0, 0}, {-1, 1, 1, 1}); },
       "begin", List{0, kMax, 0, 0}, "begin + size overflows int64"},
      {"slice sized beyond int64 bytes", [](auto& b, auto images, auto) { return ops::slice(b, images, {0, 0, 0, 0}, {-1, 1, 1, 1}); },
       "size", List{int64_t{1} << 62, 1, 1, 1}, "more bytes than a 64-bit size counts"},
      {"reshape to 2^62 x 4 x 4", [](auto& b, auto images, auto) { return ops::reshape(b, images, {-1, 4}); }, "shape",
       List{int64_t{1} << 62, 4, 4}, "more bytes than a 64-bit size counts"},
      // Shapes in files are bounded when read (tensor_codec: 2^31 elements), before any schema sees them.
      {"fill of 2^93 elements", [](auto& b, auto, auto) { return ops::fill(b, {2, 2}, 1.0); }, "shape",
       graph::Shape{int64_t{1} << 31, int64_t{1} << 31, int64_t{1} << 31}, "holds more than 2147483648 elements"},
      {"variable of 2^62 elements", [](auto& b, auto, auto) { return ops::variable(b, "big", {2, 2}); }, "shape",
       graph::Shape{int64_t{1} << 31, int64_t{1} << 31}, "holds more than 2147483648 elements"},
      {"placeholder of 2^62 elements a row", [](auto& b, auto, auto) { return ops::placeholder(b, "extra", graph::DType::f32, {-1, 2}); },
       "shape", graph::Shape{-1, int64_t{1} << 31, int64_t{1} << 31}, "holds more than 2147483648 elements"},
      // SAME padding as wide as the window: oneDNN's set-up time grows with it (the fuzzer found a
      // dilation of 2^27 + 1 that took minutes).
      {"a dilated window beyond 2^16", [](auto& b, auto images, auto) {
         return ops::conv2d(b, images, ops::variable(b, "filter", {3, 3, 1, 2}));
       }, "dilations", List{1, (int64_t{1} << 27) + 1}, "the window, dilated, spans more than 65536 elements"},
      {"a pooling window beyond 2^16", [](auto& b, auto images, auto) { return ops::max_pool(b, images); }, "ksize",
       List{2, 65537}, "the window, dilated, spans more than 65536 elements"},
      {"split into 2^20 parts", [](auto& b, auto images, auto) { return ops::split(b, images, 1, 2)[0]; }, "num_split",
       int64_t{1} << 20, "num_split must be in [1, 65535]"},
  };
  for (const Case& c : cases) {
    CAPTURE(std::string(c.what));
    const graph::Status status = load_with(c);
    CHECK(status.code() == graph::StatusCode::invalid_argument);
    CHECK_MESSAGE(status.message().find(c.message) != std::string::npos, status.message());
    CHECK(status.message().find("crafted: node ") == 0);  // the node is named, by index and name
  }
}

// The C++ API applies the same checks when a node is added.
TEST_CASE("Builder.size_arithmetic.overflow_is_an_error_naming_the_node") {
  graph::Graph g;
  graph::Builder b(g, ops::registry());
  const auto half = ops::fill(b, {int64_t{1} << 31, int64_t{1} << 31}, 1.0, graph::DType::u8);  // 2^62 bytes
  REQUIRE(b.status().ok());
  ops::concat(b, {half, half}, 0);  // 2^63 bytes
  CHECK(b.status().message().find("(Concat): output 0 u8[4294967296,2147483648] has more bytes than a 64-bit size counts") !=
        std::string::npos);

  graph::Graph g2;
  graph::Builder b2(g2, ops::registry());
  const auto wide = ops::fill(b2, {int64_t{1} << 62}, 1.0, graph::DType::u8);
  ops::concat(b2, {wide, wide}, 0);
  CHECK(b2.status().message().find("the concat dim's sizes overflow int64") != std::string::npos);
}

// The fuzzers' seed with every sizing attribute: it loads as written and its forward pass runs.
TEST_CASE("ModelFile.size_attributes.the_fuzz_seed_round_trips_and_runs") {
  const Model model = testing::tiny_sized_model();
  auto bytes = serialize_model(model);
  REQUIRE(bytes.ok());
  auto loaded = parse_model({bytes->data(), bytes->size()}, ops::registry());
  REQUIRE(loaded.ok());
  runtime::Session session(loaded->graph, ops::kernels());
  const std::vector<float> pixels = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  auto loss = session.run({{"images", runtime::Tensor::from<float>({3, 2, 2, 1}, std::span<const float>(pixels))},
                           {"labels", runtime::Tensor::from<int64_t>({3}, {0, 1, 2})}},
                          {loaded->signature.loss});
  REQUIRE(loss.ok());
  CHECK(std::isfinite((*loss)[0].data<float>()[0]));
}

}  // namespace
}  // namespace mirra::serialization
