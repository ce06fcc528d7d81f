// `mirra simulate` end to end on the example MLP and every cluster preset: one device is 100%
// efficient and more are less, hierarchical all-reduce beats a flat ring across nodes, the
// collectives carry every gradient once, --bucket-mb auto is never slower than the default cap, the
// chart is written; kernels timed from a real run's trace (--costs); a bad cluster file, trace or
// device, or a strategy it does not model, is a one-line error, exit 2.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "tests/runner/runner_process.h"

namespace mirra::runner::test {
namespace {

std::string preset(const std::string& name) { return std::string(MIRRA_SOURCE_DIR) + "/examples/clusters/" + name; }

nlohmann::json simulated(std::vector<std::string> flags, const std::string& tag) {
  std::vector<std::string> args = {"simulate", mlp_file(), "--json"};
  args.insert(args.end(), flags.begin(), flags.end());
  const Run r = run(args, tag);
  REQUIRE_MESSAGE(r.code == 0, r.err);
  return nlohmann::json::parse(last_line(r.out));
}

TEST_CASE("Runner.simulate.predicts_the_scaling_of_the_mlp_on_every_cluster_preset") {
  for (const auto& entry : std::filesystem::directory_iterator(std::string(MIRRA_SOURCE_DIR) + "/examples/clusters")) {
    CAPTURE(entry.path().string());
    const auto out = simulated({"--cluster", entry.path().string(), "--algorithm", "tree"}, "simulate_preset");
    CHECK(out["points"][0]["devices"] == 1);
    CHECK(out["points"][0]["efficiency"] == 1.0);
  }

  const std::string plot = workspace() / "scaling.svg";
  const auto out = simulated({"--cluster", preset("goyal_32x8_p100_50gbit.json"), "--plot", plot}, "simulate");
  // The MLP's 235,146 f32 parameters, each gradient all-reduced once a step.
  CHECK(out["collective_bytes_per_step"] == 235146 * 4);
  CHECK(out["collectives_per_step"].get<int>() >= 1);
  std::map<std::string, std::map<int, double>> efficiency;  // by algorithm and devices
  for (const auto& p : out["points"]) efficiency[p["algorithm"]][p["devices"].get<int>()] = p["efficiency"].get<double>();
  REQUIRE(efficiency.size() == 3);
  for (auto& entry : efficiency) {  // not a structured binding: doctest's CAPTURE takes it in a lambda
    const std::string& algorithm = entry.first;
    std::map<int, double>& by_devices = entry.second;
    CAPTURE(algorithm);
    CHECK(by_devices.size() == 9);  // 1, 2, 4, ..., 256
    CHECK(by_devices[1] == 1.0);
    CHECK(by_devices[256] < by_devices[8]);
    CHECK(by_devices[256] > 0);
  }
  CHECK(efficiency["hierarchical"][256] > efficiency["ring"][256]);
  std::ifstream chart(plot);
  std::stringstream svg;
  svg << chart.rdbuf();
  CHECK(svg.str().starts_with("<svg"));

  // The fastest cap at each point is no slower than the default 25 MiB.
  const auto automatic = simulated({"--cluster", preset("goyal_32x8_p100_50gbit.json"), "--bucket-mb", "auto"}, "simulate_auto");
  REQUIRE(automatic["points"].size() == out["points"].size());
  for (size_t i = 0; i < out["points"].size(); ++i) {
    CHECK(automatic["points"][i]["step_s"].get<double>() <= out["points"][i]["step_s"].get<double>());
    CHECK(automatic["points"][i]["collectives_per_step"].get<int>() >= 1);  // its own cap's
  }
}

// --costs: a Mirrored run's trace times every kernel of both replicas (the rewrite over the run's
// devices, --devices); the JSON says how many, how many ran at once and how long the traced steps took.
TEST_CASE("Runner.simulate.times_kernels_from_a_trace_of_a_real_run") {
  const std::string trace = workspace() / "simulate_costs.trace.json";
  const Run trained = run({"train", mlp_file(), "--threads", "2", "--batch-size", "64", "--steps", "6", "--strategy", "mirrored",
                           "--devices", "cpu:0,cpu:1", "--trace", trace},
                          "simulate_costs_train");
  REQUIRE_MESSAGE(trained.code == 0, trained.err);
  const auto out = simulated({"--cluster", preset("h200_8x_nvlink.json"), "--costs", trace, "--devices", "cpu:0,cpu:1",
                              "--batch-size", "32", "--algorithm", "ring"},
                             "simulate_costs");
  CHECK(out["measured_kernels"].get<int>() > 100);  // both replicas' and the host's
  CHECK(out["roofline_kernels"].get<int>() <= 4);   // nodes the executor never runs as kernels
  CHECK(out["costs"]["trace"] == trace);
  CHECK(out["costs"]["kernels_at_once"].get<int>() >= 1);
  CHECK(out["costs"]["traced_step_s"].get<double>() > 0);
  CHECK(out["collective_bytes_per_step"] == 235146 * 4);
  CHECK(out["points"][0]["devices"] == 1);
  CHECK(out["points"][0]["efficiency"] == 1.0);
  CHECK(out["points"][1]["step_s"].get<double>() > 0);

  // Without --devices, the rewrite is over cpu_async devices: the trace's names still time the
  // replicas' kernels, but the host's nodes are not the replicas'.
  const auto on_cpu_async = simulated({"--cluster", preset("h200_8x_nvlink.json"), "--costs", trace}, "simulate_costs_async");
  CHECK(on_cpu_async["measured_kernels"].get<int>() < out["measured_kernels"].get<int>());
}

TEST_CASE("Runner.simulate.bad_input_is_a_one_line_error_with_exit_code_2") {
  const std::string broken = workspace() / "broken_cluster.json";
  std::ofstream(broken) << R"({"name": "x", "nodes": 1, "devices_per_node": 2, "device": {"tflops": {"f32": 1}},
                              "intra_node": {"bandwidth_gb_s": 1, "latency_us": 1}})";
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"simulate", mlp_file(), "--cluster", broken}, "broken_cluster.json: 'device.memory_bandwidth_gb_s' is missing"},
      {{"simulate", mlp_file(), "--cluster", workspace() / "none.json"},
       "cannot read cluster file '" + workspace() / "none.json" + "': No such file or directory"},
      {{"simulate", mlp_file(), "--cluster", preset("h200_8x_nvlink.json"), "--strategy", "central_storage"},
       "central_storage and parameter_server are not modelled"},
      {{"simulate", mlp_file(), "--cluster", preset("h200_8x_nvlink.json"), "--bucket-mb", "-3"}, "--bucket-mb must be"},
      {{"simulate", mlp_file(), "--cluster", preset("h200_8x_nvlink.json"), "--algorithm", "star"}, "unknown all-reduce algorithm 'star'"},
      {{"simulate", mlp_file(), "--cluster", preset("h200_8x_nvlink.json"), "--costs", workspace() / "none.trace.json"},
       "cannot read trace '" + workspace() / "none.trace.json" + "': No such file or directory"},
      {{"simulate", mlp_file(), "--cluster", preset("h200_8x_nvlink.json"), "--costs", preset("h200_8x_nvlink.json")},
       "h200_8x_nvlink.json: not a Chrome trace"},
      {{"simulate", mlp_file(), "--cluster", preset("h200_8x_nvlink.json"), "--devices", "tpu:0"}, "--devices: 'devices[0]' device 'tpu:0'"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.message);
    const Run r = run(c.args, "simulate_bad");
    CHECK(r.code == 2);
    CHECK(r.err.find(c.message) != std::string::npos);
  }
}

}  // namespace
}  // namespace mirra::runner::test
