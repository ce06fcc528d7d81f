// A device kind registered from outside the tree with one call (runtime::register_device_kind: its
// name, its memory, how to open a device, whose kernels it runs) is a kind as the built-ins are: its
// devices parse and print, open in a session, run the kernels it declares, and train under Mirrored
// (one replica per device, and logical devices sharing one) as one device does. Registration refuses
// what would make names ambiguous, and a kind the runtime does not know is refused naming it.
#include <doctest/doctest.h>

#include "tests/runtime/test_device_kinds.h"
#include "tests/strategies/strategy_test_util.h"

namespace mirra::strategies::test {
namespace {

using graph::DeviceId;
using graph::DeviceKind;

// The kind the tests register, as a backend outside the tree would: stream devices in memory of
// their own that run the CPU's kernels.
DeviceKind stream_kind() { return mirra::test::stream_device_kind("test_stream", DeviceKind::cpu, "tstream"); }

TEST_CASE("DeviceKinds.a_registered_kind_parses_prints_and_opens") {
  const DeviceKind kind = stream_kind();
  CHECK(kind != DeviceKind::cpu);
  CHECK(kind != DeviceKind::cpu_async);
  CHECK(graph::device_kind_name(kind) == "test_stream");
  CHECK(graph::has_own_memory(kind));
  const graph::Expected<DeviceId> id = DeviceId::parse("test_stream:1");
  REQUIRE(id.ok());
  CHECK(*id == DeviceId{kind, 1});
  CHECK(id->to_string() == "test_stream:1");
  CHECK(DeviceId::parse("tstream:1").value() == *id);
  CHECK(DeviceId::parse("/task:2/test_stream:0").value() == DeviceId{kind, 0, 2});
  CHECK(graph::memory_owner({kind, 3}, 2) == DeviceId{kind, 2});
  CHECK(DeviceId::parse("tpu:0").status().message().starts_with(
      "device 'tpu:0': kind must be one of 'cpu', 'gpu' (also 'cuda'), 'cpu_async', 'test_stream' (also 'tstream')"));

  const int opened = mirra::test::stream_devices_opened;
  const runtime::DeviceSet set = runtime::DeviceSet::create({{kind, 0}, {kind, 1}}, 2);
  REQUIRE(set.status().ok());
  CHECK(mirra::test::stream_devices_opened == opened + 2);
  const runtime::Device* device = set.find({kind, 1});
  REQUIRE(device != nullptr);
  CHECK(device->asynchronous());
  CHECK(!device->memory_space().host);
  CHECK(runtime::check_available({kind, 7}, 1).ok());
}

TEST_CASE("DeviceKinds.registration_refuses_ambiguous_names_and_unknown_kinds_are_refused") {
  stream_kind();
  const runtime::DeviceKindSpec cpu_like{.open = mirra::test::open_stream_device};
  CHECK(runtime::register_device_kind({.name = "cpu"}, cpu_like).status().message() == "device kind 'cpu' is registered already");
  CHECK(runtime::register_device_kind({.name = "npu", .aliases = {"cuda"}}, cpu_like).status().message() ==
        "device kind 'cuda' is registered already");
  CHECK(runtime::register_device_kind({.name = "Npu"}, cpu_like).status().message() ==
        "device kind 'Npu': a kind is written as a name ([a-z][a-z0-9_]*)");
  CHECK(runtime::register_device_kind({.name = "npu"}, {}).status().message() ==
        "device kind 'npu': its spec says nothing of how to open a device");
  CHECK(!graph::find_device_kind("npu"));

  // Known to graphs, not to the runtime: a session cannot open it, and a strategy says so.
  const graph::Expected<DeviceKind> graph_only = graph::register_device_kind({.name = "test_graph_only"});
  REQUIRE(graph_only.ok());
  CHECK(runtime::find_device_kind_spec(*graph_only) == nullptr);
  const runtime::DeviceSet set = runtime::DeviceSet::create({{DeviceKind::cpu, 0}, {*graph_only, 0}});
  CHECK(set.find({DeviceKind::cpu, 0}) != nullptr);
  CHECK(set.status().message() ==
        "test_graph_only:0: device kind 'test_graph_only' is known to graphs but not registered with the runtime "
        "(runtime::register_device_kind)");
  const auto strategy = make_strategy({.strategy = "mirrored", .devices = {{*graph_only, 0}, {*graph_only, 1}}});
  CHECK(strategy.status().message() ==
        "strategy mirrored: test_graph_only:0: device kind 'test_graph_only' is not registered with the runtime");
}

// Mirrored over devices of the registered kind against one CPU device in f64: one replica per
// device (the devices sum among themselves, staged through the host), and two logical devices
// sharing one memory (summed there).
TEST_CASE("DeviceKinds.a_registered_kind_trains_under_mirrored_as_one_device") {
  const DeviceKind kind = stream_kind();
  const TrainingProgram program = build_program("mlp", ops::Optimizer::momentum_sgd(0.05, 0.9));
  const std::vector<Batch> batches = random_batches("mlp", 61, 5, 23);
  runtime::Session reference(program.graph, ops::kernels(), {.threads = 2});
  for (const Batch& batch : batches) REQUIRE(reference.run(feeds(program, batch), {}, {program.signature.train}).ok());
  const auto want = float_variables(reference);

  for (const int logical : {1, 2}) {
    CAPTURE(logical);
    auto strategy = make_strategy({.strategy = "mirrored", .devices = devices_of(kind, 2), .logical_gpus_per_gpu = logical});
    REQUIRE_MESSAGE(strategy.ok(), strategy.status().to_string());
    const AllReducePlan plan = (*strategy)->all_reduce_plan();
    CHECK(plan.path == (logical == 1 ? AllReducePath::peer : AllReducePath::on_device));
    if (logical == 1) CHECK(plan.reason == "the devices sum among themselves: the in-process collective, staged through the host");
    auto distributed = (*strategy)->distribute(program);
    REQUIRE_MESSAGE(distributed.ok(), distributed.status().to_string());
    runtime::Session session(distributed->graph, ops::kernels(), {.threads = 2, .logical_gpus_per_gpu = logical});
    for (const Batch& batch : batches) {
      const auto out = session.run(feeds(*distributed, batch), {}, {distributed->signature.train});
      REQUIRE_MESSAGE(out.ok(), out.status().to_string());
    }
    const auto got = float_variables(session);
    for (const auto& [name, value] : want) {
      if (!name.starts_with("optimizer/")) check_close(name, got.at("replica_0/" + name), value);
    }
  }
}

}  // namespace
}  // namespace mirra::strategies::test
