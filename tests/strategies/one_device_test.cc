// OneDevice placement: every node lands on the named device and the session runs it there.
#include <doctest/doctest.h>

#include "ops/ops.h"
#include "runtime/session.h"
#include "strategies/one_device.h"

namespace mirra::strategies {
namespace {

TEST_CASE("OneDevice.places_every_node_and_runs_there") {
  graph::Graph g;
  graph::Builder b(g, ops::registry());
  auto x = ops::placeholder(b, "x", graph::DType::f32, {-1, 2});
  auto w = ops::variable(b, "w", {2, 2}, ops::Initializer::ones());
  auto y = ops::matmul(b, x, w);
  const graph::DeviceId device{graph::DeviceKind::cpu, 1};
  const graph::Graph placed = place_on_device(g, device);
  for (const graph::Node& node : placed.nodes()) CHECK(node.device == device);
  runtime::Session session(placed, ops::kernels());
  auto out = session.run({{"x", runtime::Tensor::from<float>({1, 2}, {1, 2})}}, {y});
  REQUIRE(out.ok());
  CHECK((*out)[0].to_vector<float>() == std::vector<float>{3, 3});
  CHECK(session.devices().find(device)->allocator()->stats().allocations > 0);
}

}  // namespace
}  // namespace mirra::strategies
