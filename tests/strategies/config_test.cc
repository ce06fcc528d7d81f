// Strategy configs: defaults, every key, errors that name the key and the source, and every config
// in examples/configs distributing and training a model with no code change.
#include <doctest/doctest.h>

#include <cmath>

#include "strategies/config.h"
#include "tests/golden_file.h"
#include "tests/strategies/strategy_test_util.h"

namespace mirra::strategies {
namespace {

std::string error_of(std::string_view text) {
  auto config = parse_strategy_config(text, "test.json");
  return config.ok() ? "ok" : config.status().message();
}

TEST_CASE("StrategyConfig.defaults_and_keys") {
  auto defaults = parse_strategy_config("{}", "test.json");
  REQUIRE(defaults.ok());
  CHECK(defaults->strategy == "mirrored");
  CHECK(defaults->devices.size() == 2);
  CHECK(defaults->all_reduce.implementation == "auto");
  CHECK(defaults->all_reduce.bucket_mb == 25);
  CHECK(defaults->all_reduce.first_bucket_mb == 1);
  auto full = parse_strategy_config(
      R"({"strategy": "central_storage", "devices": ["cpu:0", "cpu:1", "cpu:2"],
          "all_reduce": {"implementation": "in_process", "bucket_mb": 4, "first_bucket_mb": 0.5, "timeout_s": 2.5}})",
      "test.json");
  REQUIRE(full.ok());
  CHECK(full->strategy == "central_storage");
  CHECK(full->devices.size() == 3);
  CHECK(full->devices[2].ordinal == 2);
  CHECK(full->all_reduce.implementation == "in_process");
  CHECK(full->all_reduce.bucket_mb == 4);
  CHECK(full->all_reduce.first_bucket_mb == 0.5);
  CHECK(full->all_reduce.timeout_s == 2.5);
  CHECK(defaults->logical_gpus_per_gpu == 1);
  auto logical = parse_strategy_config(R"({"devices": ["gpu:0", "gpu:1"], "logical_gpus_per_gpu": 2})", "test.json");
  REQUIRE(logical.ok());
  CHECK(logical->logical_gpus_per_gpu == 2);
  auto cut = parse_strategy_config(R"({"strategy": "parameter_server", "min_shard_bytes": 262144})", "test.json");
  REQUIRE(cut.ok());
  CHECK(cut->min_shard_bytes == 262144);
  CHECK(cut->asynchronous);  // TensorFlow's parameter servers train asynchronously
  auto sync = parse_strategy_config(R"({"strategy": "parameter_server", "update_mode": "sync"})", "test.json");
  REQUIRE(sync.ok());
  CHECK_FALSE(sync->asynchronous);
  CHECK(parse_strategy_config(R"({"strategy": "mirrored", "min_shard_bytes": 0})", "test.json").ok());
  auto one = parse_strategy_config(R"({"strategy": "one_device"})", "test.json");
  REQUIRE(one.ok());
  CHECK(one->devices.size() == 1);
}

TEST_CASE("StrategyConfig.bad_configs_name_the_key") {
  CHECK(error_of("[1]") == "test.json: the config must be a JSON object");
  CHECK(error_of("{").starts_with("test.json: not valid JSON"));
  CHECK(error_of(R"({"stratgy": "mirrored"})") ==
        "test.json: unknown key 'stratgy' (known: strategy, devices, logical_gpus_per_gpu, all_reduce, "
        "shard_optimizer_state, min_shard_bytes, update_mode, staleness)");
  for (const char* bad : {"0", "-1", "1.5", "\"2\"", "65"}) {
    CAPTURE(bad);
    CHECK(error_of(std::string(R"({"logical_gpus_per_gpu": )") + bad + "}") ==
          "test.json: 'logical_gpus_per_gpu' must be an integer in [1, 64]");
  }
  CHECK(error_of(R"({"strategy": "mirror"})") ==
        "test.json: 'strategy' is 'mirror', not one of one_device, mirrored, central_storage, multi_worker_mirrored, "
        "parameter_server");
  CHECK(error_of(R"({"strategy": 3})") == "test.json: 'strategy' must be a string");
  CHECK(error_of(R"({"devices": "cpu:0"})") == "test.json: 'devices' must be a non-empty list like [\"cpu:0\"]");
  CHECK(error_of(R"({"devices": ["cpu:0", 1]})") == "test.json: 'devices[1]' must be a device name like \"cpu:0\"");
  CHECK(error_of(R"({"devices": ["cpu:0", "cpu:0"]})") == "test.json: 'devices[1]' repeats cpu:0");
  CHECK(error_of(R"({"devices": ["tpu:0"]})").starts_with("test.json: 'devices[0]' "));
  CHECK(error_of(R"({"strategy": "one_device", "devices": ["cpu:0", "cpu:1"]})") ==
        "test.json: 'devices' must name exactly one device for one_device");
  CHECK(error_of(R"({"all_reduce": {"bucket_size": 4}})") ==
        "test.json: unknown key 'all_reduce.bucket_size' (known: implementation, bucket_mb, first_bucket_mb, timeout_s, "
        "compression)");
  CHECK(error_of(R"({"all_reduce": {"bucket_mb": "big"}})") == "test.json: 'all_reduce.bucket_mb' must be a number of MiB");
  CHECK(error_of(R"({"all_reduce": {"timeout_s": -1}})") ==
        "test.json: 'all_reduce.timeout_s' must be in [0, 86400] seconds (0: no deadline)");
  CHECK(error_of(R"({"all_reduce": {"first_bucket_mb": 0}})") ==
        "test.json: 'all_reduce.first_bucket_mb' must be in (0, 65536] MiB");
  CHECK(error_of(R"({"all_reduce": {"implementation": "nccl"}})")  // then any registered communicator
            .starts_with("test.json: 'all_reduce.implementation' is 'nccl', not one of auto, in_process, mpi"));
  CHECK(error_of(R"({"shard_optimizer_state": "yes"})") == "test.json: 'shard_optimizer_state' must be true or false");
  for (const char* bad : {"-1", "1.5", "\"64K\""}) {
    CAPTURE(bad);
    CHECK(error_of(std::string(R"({"strategy": "parameter_server", "min_shard_bytes": )") + bad + "}") ==
          "test.json: 'min_shard_bytes' must be a number of bytes, 0 or more");
  }
  CHECK(error_of(R"({"strategy": "mirrored", "min_shard_bytes": 1024})") ==
        "test.json: 'min_shard_bytes' applies to parameter_server, whose servers hold parts of variables, not to mirrored");
  CHECK(error_of(R"({"strategy": "parameter_server", "update_mode": "asynchronous"})") ==
        "test.json: 'update_mode' must be \"async\" or \"sync\"");
  CHECK(error_of(R"({"strategy": "mirrored", "update_mode": "sync"})") ==
        "test.json: 'update_mode' applies to parameter_server, whose servers apply the updates, not to mirrored");
  CHECK(error_of(R"({"strategy": "parameter_server", "update_mode": "sync", "staleness": -1})") ==
        "test.json: 'staleness' must be a number of steps, 0 or more");
  CHECK(error_of(R"({"strategy": "parameter_server", "staleness": 2})") ==
        "test.json: 'staleness' bounds how far a worker runs ahead under parameter_server's \"update_mode\": \"sync\"");
  CHECK(error_of(R"({"strategy": "parameter_server", "update_mode": "sync", "staleness": 0})") == "ok");
  CHECK(error_of(R"({"strategy": "central_storage", "shard_optimizer_state": true})") ==
        "test.json: 'shard_optimizer_state' applies to mirrored and multi_worker_mirrored, whose replicas each keep "
        "optimizer slots, not to central_storage");
  CHECK(error_of(R"({"strategy": "multi_worker_mirrored", "shard_optimizer_state": true})") == "ok");
  CHECK(error_of(R"({"devices": ["gpu:0", "gpu:1"], "shard_optimizer_state": true})") == "ok");
  CHECK(error_of(R"({"strategy": "one_device", "shard_optimizer_state": false})") == "ok");
  CHECK(load_strategy_config("/nonexistent/strategy.json").status().message() ==
        "cannot read strategy config '/nonexistent/strategy.json': No such file or directory");
}

TEST_CASE("StrategyConfig.every_example_config_trains") {
  const TrainingProgram program = test::build_program("small_cnn", ops::Optimizer::momentum_sgd(0.05, 0.9));
  const auto batches = test::random_batches("small_cnn", 9, 3, 5);
  for (const char* file : {"one_device.json", "mirrored.json", "central_storage.json"}) {
    CAPTURE(file);
    auto config = load_strategy_config(mirra::test::source_file(std::string("examples/configs/") + file));
    REQUIRE_MESSAGE(config.ok(), config.status().to_string());
    auto strategy = make_strategy(*config);
    REQUIRE(strategy.ok());
    auto distributed = (*strategy)->distribute(program);
    REQUIRE_MESSAGE(distributed.ok(), distributed.status().to_string());
    runtime::Session session(distributed->graph, ops::kernels());
    for (const auto& batch : batches) {
      auto out = session.run(test::feeds(*distributed, batch), {distributed->signature.loss},
                             {distributed->signature.train});
      REQUIRE_MESSAGE(out.ok(), out.status().to_string());
      CHECK(std::isfinite((*out)[0].values<float>()[0]));
    }
  }
}

}  // namespace
}  // namespace mirra::strategies
