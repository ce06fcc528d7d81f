// Multi-worker training across processes on this machine, launched by mpirun as users launch it
// (and the MPI collective's operations on their own, tests/multi_worker/collective_worker.cc):
// W workers x R local replicas give the variables one device gives (the MLP, SGD with momentum and
// Adam, global batch 128 and 61, 20 steps) and report its losses (for a loss over [batch, classes]
// with a weight decay too, and for a loss over a declared weight), hold the state its train step writes from the batch as one device does, also accumulating gradients over 2 batches per step, with
// optimizer state sharded over every worker's replicas, and (within bf16's rounding) with the gradients all-reduced in bf16;
// ResNet-20 with synchronised batch normalisation trains as one device does; the parameter-server
// strategy's tasks, started by mpirun from a config, take their roles from their ranks; a GPT with dropout
// (masks keyed by example) trains over 2 workers x 2 devices as one device does; a TFRecord and an npz
// data set shard across workers as one device trains on them;
// checkpoints resume across worker counts and strategies; each worker's trace splits its all-reduces
// into phases; a worker with another config stops every worker with an
// error naming it; 1,000 short steps with many small buckets finish (no deadlock); a worker killed
// (SIGKILL) or stopped (SIGSTOP) mid-training ends the run with a non-zero exit within the
// collective deadline, and no worker is left running.
#include <doctest/doctest.h>

#include <signal.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "examples/example_models.h"
#include "serialization/model_file.h"
#include "tests/local_addresses.h"
#include "tests/runner/runner_process.h"

namespace mirra::runner::test {
namespace {

using namespace std::chrono_literals;

// `mpirun -np workers mirra args...` (as root and with more workers than cores, as CI runs it).
std::vector<std::string> mpirun(int workers, const std::vector<std::string>& args) {
  std::vector<std::string> argv = {MIRRA_MPIRUN, "--allow-run-as-root", "--oversubscribe", "-np", std::to_string(workers),
                                   MIRRA_RUNNER};
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

Run run_program(std::vector<std::string> argv, const std::string& tag) {
  const Process p = spawn_program(std::move(argv), tag);
  const std::optional<int> code = wait_for(p, 300s);
  REQUIRE_MESSAGE(code.has_value(), tag << " did not finish within 300 s");
  return {*code, read_text(p.out), read_text(p.err)};
}

TEST_CASE("MultiWorker.every_collective_matches_a_plain_loop_across_workers") {
  for (int workers : {2, 3}) {
    CAPTURE(workers);
    const Run r = run_program({MIRRA_MPIRUN, "--allow-run-as-root", "--oversubscribe", "-np", std::to_string(workers),
                               MIRRA_COLLECTIVE_WORKER},
                              "collective_worker");
    INFO(r.err);
    REQUIRE(r.code == 0);
    for (int w = 0; w < workers; ++w) CHECK(r.out.find("worker " + std::to_string(w) + ": ok") != std::string::npos);
  }
}

TEST_CASE("MultiWorker.a_graph_cut_by_task_runs_one_task_per_worker") {
  const Run r = run_program({MIRRA_MPIRUN, "--allow-run-as-root", "--oversubscribe", "-np", "2", MIRRA_TASK_WORKER}, "task_worker");
  INFO(r.err);
  REQUIRE(r.code == 0);
  for (int t = 0; t < 2; ++t) CHECK(r.out.find("task " + std::to_string(t) + ": ok") != std::string::npos);
}

// The example MLP with Adam instead of its SGD with momentum. Adam divides each gradient element by
// its own magnitude, so an element whose examples nearly cancel moves by up to the learning rate
// whatever the rounding of its sum; an epsilon of 1e-3 keeps such elements from amplifying the
// different order in which workers add their shares.
const std::string& adam_mlp_file() {
  static const std::string path = [] {
    const std::string p = workspace() / "mlp_adam.mirra";
    auto model = examples::build_example_model("mlp", 1);
    REQUIRE(model.ok());
    model->signature.optimizer.kind = "adam";
    model->signature.optimizer.hyper_parameters = {{"learning_rate", 0.001}, {"epsilon", 1e-3}};
    model->signature.optimizer.state.clear();
    REQUIRE(serialization::save_model(*model, p).ok());
    return p;
  }();
  return path;
}


TEST_CASE("MultiWorker.equivalent_to_one_device") {
  for (const std::string& model : {mlp_file(), adam_mlp_file()}) {
    for (const char* batch : {"128", "61"}) {
      const std::vector<std::string> common = {"train", model, "--steps", "20", "--batch-size", batch, "--threads", "1", "--json"};
      std::vector<std::string> reference = common;
      const std::string reference_file = workspace() / "reference.mirra";
      reference.insert(reference.end(), {"--strategy", "one_device", "--devices", "cpu:0", "--save", reference_file});
      REQUIRE(run(reference, "reference").code == 0);
      const auto want = trained_values(reference_file);
      for (int workers : {2, 3}) {
        for (const char* devices : {"cpu:0", "cpu:0,cpu:1"}) {
          CAPTURE(model);
          CAPTURE(batch);
          CAPTURE(workers);
          CAPTURE(devices);
          const std::string saved = workspace() / "multi_worker.mirra";
          std::vector<std::string> args = common;
          args.insert(args.end(), {"--strategy", "multi_worker_mirrored", "--devices", devices, "--save", saved});
          const Run r = run_program(mpirun(workers, args), "multi_worker");
          REQUIRE_MESSAGE(r.code == 0, r.err);
          CHECK(last_line(r.out).find("\"strategy\":\"multi_worker_mirrored\"") != std::string::npos);
          check_close(trained_values(saved), want, 1e-5);
        }
      }
    }
  }
}

// The parameter-server strategy from the config alone: its "cluster" names the tasks' addresses and
// mpirun starts them, each taking its role from its rank (ranks 0 and 1 the servers, 2 and 3 the
// workers); server 0 saves what one device saves after 20 steps of 61.
TEST_CASE("MultiWorker.parameter_server_tasks_take_their_roles_from_their_ranks") {
  const std::vector<std::string> addresses = mirra::test::free_local_addresses(4);
  REQUIRE(addresses.size() == 4);
  const std::string config = workspace() / "parameter_server.json";
  std::ofstream(config) << nlohmann::json({{"strategy", "parameter_server"},
                                           {"update_mode", "sync"},
                                           {"cluster", {{"ps", {addresses[0], addresses[1]}},
                                                        {"worker", {addresses[2], addresses[3]}},
                                                        {"token", "s3cret"}}}})
                               .dump();
  const std::vector<std::string> common = {"train", mlp_file(), "--steps", "20", "--batch-size", "61", "--threads", "1"};
  std::vector<std::string> reference = common;
  const std::string reference_file = workspace() / "ps_reference.mirra";
  reference.insert(reference.end(), {"--strategy", "one_device", "--devices", "cpu:0", "--save", reference_file});
  REQUIRE(run(reference, "ps_reference").code == 0);
  const std::string saved = workspace() / "ps_from_ranks.mirra";
  std::vector<std::string> args = common;
  args.insert(args.end(), {"--config", config, "--save", saved});
  const Run r = run_program(mpirun(4, args), "ps_from_ranks");
  REQUIRE_MESSAGE(r.code == 0, r.err);
  CHECK(r.out.find("ps 1 serving 20 steps") != std::string::npos);
  check_close(trained_values(saved), trained_values(reference_file), 1e-5);
}

// The data sets users bring shard across workers as Fashion-MNIST's files do: TensorFlow's TFRecord
// file of 600 PNG images, the same file GZIP-compressed (a stream, shuffled through a buffer), and the
// same examples in an npz written by numpy, 2 and 3 workers of 1 and 2 devices against one device, 20
// steps of 61 examples (two epochs and part of a third).
TEST_CASE("MultiWorker.a_tfrecord_and_an_npz_data_set_train_as_one_device") {
  const std::string command = std::string(MIRRA_SYSTEM_PYTHON) + " " + MIRRA_SOURCE_DIR + "/tests/runner/fashion_mnist_600_npz.py " +
                              "/usr/share/datasets/fashion-mnist " + workspace().dir.string();
  REQUIRE_MESSAGE(std::system(command.c_str()) == 0, command);
  const std::string scale = R"("scale": 0.00392156862745098)";
  const std::string tfrecord = R"({"data": {"train": {"files": [")" + std::string(MIRRA_SOURCE_DIR) +
                               R"(/tests/runtime/tfrecord_reference/fashion_mnist_600.tfrecord"], "features": {"image": {"type": "bytes",
    "shape": [28, 28, 1], "decode": "image"}, "label": {"type": "int64"}}, "fields": {"images": {"field": "image", )" + scale +
                               R"(}, "labels": "label"}}}})";
  const std::string npz = R"({"data": {"train": {"files": [")" + (workspace() / "fashion_mnist_600.npz") +
                          R"("], "fields": {"images": {"field": "images", )" + scale + R"(}, "labels": "labels"}}}})";
  const std::string gzip_command = "gzip -c " + std::string(MIRRA_SOURCE_DIR) + "/tests/runtime/tfrecord_reference/fashion_mnist_600.tfrecord > " +
                                   (workspace() / "fashion_mnist_600.tfrecord.gz");
  REQUIRE_MESSAGE(std::system(gzip_command.c_str()) == 0, gzip_command);
  const std::string gzip = R"({"data": {"shuffle_buffer": 50, "train": {"files": [")" + (workspace() / "fashion_mnist_600.tfrecord.gz") +
                           R"("], "compression": "gzip", "features": {"image": {"type": "bytes", "shape": [28, 28, 1], "decode": "image"},
    "label": {"type": "int64"}}, "fields": {"images": {"field": "image", )" + scale + R"(}, "labels": "label"}}}})";
  for (const auto& data_set : {std::pair{"tfrecord", tfrecord}, std::pair{"tfrecord_gzip", gzip}, std::pair{"npz", npz}}) {
    const std::string name = data_set.first, text = data_set.second;
    const std::string config = workspace() / (std::string(name) + "_data.json");
    std::ofstream(config) << text;
    const std::vector<std::string> common = {"train", mlp_file(), "--config", config, "--steps", "20", "--batch-size", "61",
                                             "--threads", "1", "--json"};
    std::vector<std::string> reference = common;
    const std::string reference_file = workspace() / "data_reference.mirra";
    reference.insert(reference.end(), {"--strategy", "one_device", "--devices", "cpu:0", "--save", reference_file});
    const Run one = run(reference, "data_reference");
    REQUIRE_MESSAGE(one.code == 0, one.err);
    const auto want = trained_values(reference_file);
    for (int workers : {2, 3}) {
      for (const char* devices : {"cpu:0", "cpu:0,cpu:1"}) {
        CAPTURE(name);
        CAPTURE(workers);
        CAPTURE(devices);
        const std::string saved = workspace() / "data_multi_worker.mirra";
        std::vector<std::string> args = common;
        args.insert(args.end(), {"--strategy", "multi_worker_mirrored", "--devices", devices, "--save", saved});
        const Run r = run_program(mpirun(workers, args), "data_multi_worker");
        REQUIRE_MESSAGE(r.code == 0, r.err);
        check_close(trained_values(saved), want, 1e-5);
      }
    }
  }
}

// A stream of two GZIP files sharded by file: each of 2 workers reads its own file (300 examples,
// 10 batches of 60 split 30 / 30) and the run trains, the epochs as long as the files say; 3 workers
// cannot share 2 files and are told so before any step.
TEST_CASE("MultiWorker.a_stream_sharded_by_file_trains_each_worker_on_its_own_files") {
  const std::string source = std::string(MIRRA_SOURCE_DIR) + "/tests/runtime/tfrecord_reference/fashion_mnist_600.tfrecord";
  const std::string split = std::string(MIRRA_SYSTEM_PYTHON) + " -c \"import gzip, struct, sys\n"
                            "data = open(sys.argv[1], 'rb').read(); records = []; at = 0\n"
                            "while at < len(data):\n"
                            "    n = struct.unpack_from('<Q', data, at)[0]; records.append(data[at:at + 16 + n]); at += 16 + n\n"
                            "for part in range(2):\n"
                            "    gzip.open(sys.argv[2] + str(part) + '.tfrecord.gz', 'wb').write(b''.join(records[part::2]))\" " +
                            source + " " + (workspace() / "part");
  REQUIRE_MESSAGE(std::system(split.c_str()) == 0, split);
  const std::string config = workspace() / "by_file.json";
  std::ofstream(config) << R"({"data": {"shard": "file", "train": {"files": [")" + (workspace() / "part0.tfrecord.gz") + R"(", ")" +
                               (workspace() / "part1.tfrecord.gz") +
                               R"("], "features": {"image": {"type": "bytes", "shape": [28, 28, 1], "decode": "image"},
    "label": {"type": "int64"}}, "fields": {"images": {"field": "image", "scale": 0.00392156862745098}, "labels": "label"}}}})";
  const std::vector<std::string> args = {"train", mlp_file(), "--config", config, "--epochs", "2", "--batch-size", "60",
                                         "--threads", "1", "--strategy", "multi_worker_mirrored", "--devices", "cpu:0", "--json"};
  const Run r = run_program(mpirun(2, args), "by_file");
  REQUIRE_MESSAGE(r.code == 0, r.err);
  const auto summary = nlohmann::json::parse(last_line(r.out));
  CHECK(summary.at("steps") == 20);
  CHECK(summary.at("examples") == 1200);
  CHECK(std::isfinite(summary.at("final_loss").get<double>()));
  const Run three = run_program(mpirun(3, args), "by_file_three");
  CHECK(three.code == 2);
  CHECK(three.err.find("2 files cannot be dealt to 3 workers by file") != std::string::npos);
}

// ResNet-20 in float64 with synchronised batch normalisation over 2 workers x 2 devices, 61 examples
// a step split unevenly, reports the losses one device reports at every one of 20 steps and saves its
// variables and moving statistics, within 1e-5 relative; per replica it does not. (In f32 ResNet-20
// amplifies roundings from step to step, as one device does between thread counts.)
TEST_CASE("MultiWorker.synchronised_batch_norm_trains_resnet20_as_one_device") {
  const std::vector<std::string> common = {"train", resnet20_f64_file(), "--batch-size", "61", "--lr", "0.005",
                                           "--threads", "1"};
  constexpr int kSteps = 20;
  std::vector<std::string> reference = common;
  const std::string reference_file = workspace() / "resnet_one.mirra";
  reference.insert(reference.end(), {"--steps", std::to_string(kSteps), "--strategy", "one_device", "--devices", "cpu:0",
                                     "--metrics", workspace() / "resnet_one.jsonl", "--save", reference_file});
  REQUIRE(run(reference, "resnet_reference").code == 0);
  const std::vector<double> want = step_losses(workspace() / "resnet_one.jsonl");
  REQUIRE(want.size() == kSteps);
  for (const bool sync : {true, false}) {
    CAPTURE(sync);
    std::vector<std::string> args = common;
    const std::string metrics = workspace() / "resnet_workers.jsonl", saved = workspace() / "resnet_workers.mirra";
    args.insert(args.end(), {"--strategy", "multi_worker_mirrored", "--devices", "cpu:0,cpu:1", "--metrics", metrics,
                             "--steps", sync ? std::to_string(kSteps) : "1", "--save", saved});
    if (sync) args.push_back("--sync-batch-norm");
    const Run r = run_program(mpirun(2, args), "resnet_workers");
    REQUIRE_MESSAGE(r.code == 0, r.err);
    const std::vector<double> got = step_losses(metrics);
    if (!sync) {
      REQUIRE(got.size() == 1);
      CHECK(std::abs(got[0] - want[0]) > 1e-3 * want[0]);  // each replica's own statistics
      continue;
    }
    REQUIRE(got.size() == want.size());
    for (size_t step = 0; step < want.size(); ++step) {
      CAPTURE(step);
      CHECK(got[step] == doctest::Approx(want[step]).epsilon(1e-5));
    }
    check_close(trained_values(saved), trained_values(reference_file), 1e-5);
  }
}

// Dropout keyed by example: a GPT with dropout 0.2 on a token file, 20 steps of 7 sequences (uneven
// over 2 workers x 2 devices), draws for each example what one device draws, so the workers end with
// one device's weights; with the optimizer state sharded too (AdamW clipped by the global norm of
// every worker's shares). The attention's key bias has a gradient of rounding noise alone (softmax
// ignores what a query adds to all its scores), which AdamW's epsilon of 1e-8 would turn into steps
// of the learning rate that differ with the summation order; an epsilon of 1e-3 keeps them small.
TEST_CASE("MultiWorker.a_gpt_with_dropout_trains_as_one_device") {
  const std::string dir = workspace().dir.string();
  const std::string command = std::string(MIRRA_SYSTEM_PYTHON) + " " + MIRRA_SOURCE_DIR + "/tests/runner/tokens_bin.py " + dir;
  REQUIRE_MESSAGE(std::system(command.c_str()) == 0, command);
  auto gpt = examples::build_example_model("gpt", 1, {.vocab = 50, .context = 16, .layers = 1, .heads = 2, .embedding = 16, .dropout = 0.2});
  REQUIRE_MESSAGE(gpt.ok(), gpt.status().to_string());
  gpt->signature.optimizer.hyper_parameters.set("epsilon", 1e-3);
  const std::string model = workspace() / "gpt_dropout.mirra";
  REQUIRE(serialization::save_model(*gpt, model).ok());
  const std::string config = workspace() / "gpt_tokens.json";
  std::ofstream(config) << R"({"data": {"train": {"format": "tokens", "files": [")" << dir
                        << R"(/tokens.bin"], "tokens": {"type": "u16", "context": 16}}},
    "training": {"batch_size": 7, "learning_rate": 0.003, "deterministic": true}})";
  const std::vector<std::string> common = {"train", model, "--config", config, "--steps", "20", "--threads", "1", "--json"};
  std::vector<std::string> reference = common;
  const std::string reference_file = workspace() / "gpt_one.mirra";
  reference.insert(reference.end(), {"--strategy", "one_device", "--devices", "cpu:0", "--save", reference_file});
  const Run one = run(reference, "gpt_one");
  REQUIRE_MESSAGE(one.code == 0, one.err);
  const auto final_loss = [](const Run& run) { return nlohmann::json::parse(last_line(run.out)).at("final_loss").get<double>(); };
  for (const bool sharded : {false, true}) {
    CAPTURE(sharded);
    std::vector<std::string> args = common;
    const std::string saved = workspace() / "gpt_workers.mirra";
    args.insert(args.end(), {"--strategy", "multi_worker_mirrored", "--devices", "cpu:0,cpu:1", "--save", saved});
    if (sharded) args.push_back("--shard-optimizer-state");
    const Run r = run_program(mpirun(2, args), "gpt_workers");
    REQUIRE_MESSAGE(r.code == 0, r.err);
    CHECK(final_loss(r) == doctest::Approx(final_loss(one)).epsilon(1e-5));
    check_close(trained_values(saved), trained_values(reference_file), 1e-5);
  }
}

// A loss over [batch, classes] plus a weight decay: the workers report the losses one device reports
// for the same global batches, 61 examples split unevenly over 2 workers x 1 and 2 devices.
TEST_CASE("MultiWorker.reports_a_loss_over_batch_and_classes_as_one_device") {
  const std::vector<std::string> common = {"train", brier_mlp_file(), "--steps", "8", "--batch-size", "61", "--threads", "1"};
  std::vector<std::string> reference = common;
  reference.insert(reference.end(), {"--strategy", "one_device", "--devices", "cpu:0", "--metrics", workspace() / "brier_one.jsonl"});
  REQUIRE(run(reference, "brier_reference").code == 0);
  const std::vector<double> want = step_losses(workspace() / "brier_one.jsonl");
  REQUIRE(want.size() == 8);
  for (const char* devices : {"cpu:0", "cpu:0,cpu:1"}) {
    CAPTURE(devices);
    std::vector<std::string> args = common;
    args.insert(args.end(), {"--strategy", "multi_worker_mirrored", "--devices", devices, "--metrics", workspace() / "brier_workers.jsonl"});
    const Run r = run_program(mpirun(2, args), "brier_workers");
    REQUIRE_MESSAGE(r.code == 0, r.err);
    const std::vector<double> got = step_losses(workspace() / "brier_workers.jsonl");
    REQUIRE(got.size() == want.size());
    for (size_t step = 0; step < want.size(); ++step) {
      CAPTURE(step);
      CHECK(got[step] == doctest::Approx(want[step]).epsilon(1e-4));
    }
  }
}

// State the train step writes from the batch (a count of images, a moving mean image, the first
// image, and the moving mean synchronised on read: averaged across the workers when saved), combined
// across 2 workers x 1 and 2 devices as each variable's aggregation says, holds
// what one device's holds; batches of 128 split evenly, so the mean of the replicas' means is the
// batch's mean.
TEST_CASE("MultiWorker.state_written_from_the_batch_trains_as_one_device") {
  const std::vector<std::string> common = {"train", stats_mlp_file(), "--steps", "5", "--batch-size", "128", "--threads", "1"};
  std::vector<std::string> reference = common;
  const std::string reference_file = workspace() / "stats_reference.mirra";
  reference.insert(reference.end(), {"--strategy", "one_device", "--devices", "cpu:0", "--save", reference_file});
  REQUIRE(run(reference, "stats_reference").code == 0);
  const auto want = trained_values(reference_file);
  REQUIRE(want.at("stats/images_seen").values<float>()[0] == 640);
  for (const char* devices : {"cpu:0", "cpu:0,cpu:1"}) {
    CAPTURE(devices);
    const std::string saved = workspace() / "stats_workers.mirra";
    std::vector<std::string> args = common;
    args.insert(args.end(), {"--strategy", "multi_worker_mirrored", "--devices", devices, "--save", saved});
    const Run r = run_program(mpirun(2, args), "stats_workers");
    REQUIRE_MESSAGE(r.code == 0, r.err);
    check_close(trained_values(saved), want, 1e-5);
  }
}

// A loss averaged over a declared weight (the examples not labelled 9): 61 examples split unevenly
// over 2 workers x 1 and 2 devices, divided by the weight of the whole batch across workers, report
// the losses and metrics and train the variables one device does. Two steps: a share divided by its
// own weight instead is off from the first, while longer runs let rounding differences of products
// over other row counts (oneDNN's on AVX2 machines) flip a ReLU near zero and move a bias by 1e-3 of
// itself by the sixth step.
TEST_CASE("MultiWorker.a_loss_over_a_declared_weight_trains_as_one_device") {
  const std::vector<std::string> common = {"train", masked_mlp_file(), "--steps", "2", "--batch-size", "61", "--threads", "1"};
  std::vector<std::string> reference = common;
  const std::string reference_file = workspace() / "masked_reference.mirra";
  reference.insert(reference.end(), {"--strategy", "one_device", "--devices", "cpu:0", "--save", reference_file,
                                     "--metrics", workspace() / "masked_one.jsonl"});
  REQUIRE(run(reference, "masked_reference").code == 0);
  const std::vector<double> want = step_losses(workspace() / "masked_one.jsonl");
  REQUIRE(want.size() == 2);
  for (const char* devices : {"cpu:0", "cpu:0,cpu:1"}) {
    CAPTURE(devices);
    const std::string saved = workspace() / "masked_workers.mirra";
    std::vector<std::string> args = common;
    args.insert(args.end(), {"--strategy", "multi_worker_mirrored", "--devices", devices, "--save", saved, "--metrics",
                             workspace() / "masked_workers.jsonl"});
    const Run r = run_program(mpirun(2, args), "masked_workers");
    REQUIRE_MESSAGE(r.code == 0, r.err);
    const std::vector<double> got = step_losses(workspace() / "masked_workers.jsonl");
    REQUIRE(got.size() == want.size());
    for (const char* name : {"kept", "kept_accuracy"}) {
      CAPTURE(name);
      CHECK(step_metric(workspace() / "masked_workers.jsonl", name) == step_metric(workspace() / "masked_one.jsonl", name));
    }
    for (size_t step = 0; step < want.size(); ++step) {
      CAPTURE(step);
      CHECK(got[step] == doctest::Approx(want[step]).epsilon(1e-4));
    }
    check_close(trained_values(saved), trained_values(reference_file), 1e-5);
  }
}

// Gradient accumulation across workers: 2 batches of 61 per step, each split over 2 workers x 2
// devices, train as one device does on batches of 122.
TEST_CASE("MultiWorker.accumulation_steps.train_as_k_times_larger_batches") {
  const std::vector<std::string> common = {"train", mlp_file(), "--steps", "10", "--threads", "1", "--json"};
  std::vector<std::string> reference = common;
  const std::string reference_file = workspace() / "reference_122.mirra";
  reference.insert(reference.end(), {"--batch-size", "122", "--strategy", "one_device", "--devices", "cpu:0", "--save", reference_file});
  REQUIRE(run(reference, "reference_122").code == 0);
  const std::string saved = workspace() / "multi_worker_accumulated.mirra";
  std::vector<std::string> args = common;
  args.insert(args.end(), {"--batch-size", "61", "--accumulation-steps", "2", "--strategy", "multi_worker_mirrored",
                           "--devices", "cpu:0,cpu:1", "--save", saved});
  const Run r = run_program(mpirun(2, args), "multi_worker_accumulated");
  REQUIRE_MESSAGE(r.code == 0, r.err);
  CHECK(last_line(r.out).find("\"examples\":1220") != std::string::npos);
  check_close(trained_values(saved), trained_values(reference_file), 1e-5);
}

// Sharded optimizer state across workers (each of the W x R replicas holding its own share of every
// slot): 2 workers x 1, 2 and 3 devices with Adam and momentum, global batch 61, train as one device
// does; the checkpoint they write (worker 0 gathering every worker's shares) holds whole slots and
// resumes on one device, and sharded again over 3 workers, which save the trained model.
TEST_CASE("MultiWorker.shard_optimizer_state.trains_as_one_device") {
  for (const std::string& model : {mlp_file(), adam_mlp_file()}) {
    const std::vector<std::string> common = {"train", model, "--batch-size", "61", "--threads", "1", "--json"};
    const std::string reference_file = workspace() / "reference_sharded.mirra";
    std::vector<std::string> reference = common;
    reference.insert(reference.end(), {"--steps", "16", "--strategy", "one_device", "--devices", "cpu:0", "--save", reference_file});
    const Run one_device = run(reference, "reference_sharded");
    REQUIRE(one_device.code == 0);
    const int64_t slot_bytes = nlohmann::json::parse(last_line(one_device.out))["optimizer_slot_bytes"]["cpu:0"].get<int64_t>();
    for (const std::string devices : {"cpu:0", "cpu:0,cpu:1", "cpu:0,cpu:1,cpu:2"}) {
      CAPTURE(model);
      CAPTURE(devices);
      const std::string dir = workspace() / "sharded_checkpoints";
      std::filesystem::remove_all(dir);
      std::vector<std::string> args = common;
      args.insert(args.end(), {"--steps", "8", "--strategy", "multi_worker_mirrored", "--devices", devices,
                               "--shard-optimizer-state", "--checkpoint-dir", dir});
      const Run r = run_program(mpirun(2, args), "multi_worker_sharded");
      REQUIRE_MESSAGE(r.code == 0, r.err);
      const auto summary = nlohmann::json::parse(last_line(r.out));
      CHECK(summary["shard_optimizer_state"].get<bool>());
      // Each of worker 0's replicas holds 1/(2 L) of the slots, give or take an element per slot.
      const auto& held = summary["optimizer_slot_bytes"];
      const int64_t replicas = static_cast<int64_t>(held.size());
      CHECK(replicas == std::count(devices.begin(), devices.end(), ',') + 1);
      for (const auto& item : held.items()) {
        const std::string device = item.key();  // not a structured binding: CAPTURE's lambda takes it
        CAPTURE(device);
        CHECK(std::abs(item.value().get<int64_t>() - slot_bytes / (2 * replicas)) <= 64);
      }
      const std::string saved = workspace() / "sharded_resumed.mirra";
      std::vector<std::string> resumed = common;
      resumed.insert(resumed.end(), {"--steps", "16", "--strategy", "one_device", "--devices", "cpu:0", "--checkpoint-dir",
                                     dir, "--resume", "--save", saved});
      REQUIRE(run(resumed, "sharded_resumed_on_one_device").code == 0);
      check_close(trained_values(saved), trained_values(reference_file), 1e-5);
      std::vector<std::string> across = common;
      across.insert(across.end(), {"--steps", "16", "--strategy", "multi_worker_mirrored", "--devices", devices,
                                   "--shard-optimizer-state", "--checkpoint-dir", dir, "--resume", "--save", saved});
      const Run again = run_program(mpirun(3, across), "sharded_resumed_on_3_workers");
      REQUIRE_MESSAGE(again.code == 0, again.err);
      check_close(trained_values(saved), trained_values(reference_file), 1e-5);
    }
  }
}

// bf16 all-reduce across workers (MPI sums bf16 with an operation of its own, in f32, rounding each
// sum): 2 workers x 1 device train bit for bit as Mirrored over 2 devices in one process with bf16
// all-reduce (either way each gradient element is the sum of two bf16 values, rounded once), and
// differently from Mirrored without it.
TEST_CASE("MultiWorker.bf16_all_reduce.equals_in_process_bf16_all_reduce") {
  const auto config = [](const std::string& name, const std::string& text) {
    const std::string path = workspace() / name;
    std::ofstream(path) << text;
    return path;
  };
  const std::vector<std::string> common = {"train", mlp_file(), "--batch-size", "61", "--steps", "10", "--threads", "1", "--json"};
  std::map<std::string, std::map<std::string, graph::TensorValue>> trained;
  for (const char* compression : {"none", "bf16"}) {
    const std::string saved = workspace() / (std::string("in_process_") + compression + ".mirra");
    std::vector<std::string> args = common;
    args.insert(args.end(), {"--config",
                             config(std::string("in_process_") + compression + ".json",
                                    std::string(R"({"strategy": "mirrored", "devices": ["cpu:0", "cpu:1"], "all_reduce": {"compression": ")") +
                                        compression + R"("}})"),
                             "--save", saved});
    REQUIRE(run(args, std::string("in_process_") + compression).code == 0);
    trained[compression] = trained_values(saved);
  }
  const std::string saved = workspace() / "multi_worker_bf16.mirra";
  std::vector<std::string> args = common;
  args.insert(args.end(), {"--config",
                           config("multi_worker_bf16.json",
                                  R"({"strategy": "multi_worker_mirrored", "devices": ["cpu:0"], "all_reduce": {"compression": "bf16"}})"),
                           "--save", saved});
  const Run r = run_program(mpirun(2, args), "multi_worker_bf16");
  REQUIRE_MESSAGE(r.code == 0, r.err);
  CHECK(trained_values(saved) == trained["bf16"]);
  CHECK(trained["bf16"] != trained["none"]);
}

TEST_CASE("MultiWorker.checkpoints_resume_with_other_worker_counts_and_strategies") {
  // 10 steps on 2 workers, 10 more on 3 workers, 10 more on one device: the variables of 30 steps on
  // one device.
  const std::vector<std::string> common = {"train", mlp_file(), "--batch-size", "61", "--threads", "1", "--json"};
  const std::string reference_file = workspace() / "reference_30.mirra";
  std::vector<std::string> reference = common;
  reference.insert(reference.end(), {"--steps", "30", "--strategy", "one_device", "--devices", "cpu:0", "--save", reference_file});
  REQUIRE(run(reference, "reference_30").code == 0);

  const std::string dir = workspace() / "resumed_checkpoints";
  std::vector<std::string> first = common;
  first.insert(first.end(), {"--steps", "10", "--strategy", "multi_worker_mirrored", "--devices", "cpu:0", "--checkpoint-dir", dir});
  const Run a = run_program(mpirun(2, first), "resume_first");
  REQUIRE_MESSAGE(a.code == 0, a.err);
  std::vector<std::string> second = common;
  second.insert(second.end(), {"--steps", "20", "--strategy", "multi_worker_mirrored", "--devices", "cpu:0,cpu:1",
                               "--checkpoint-dir", dir, "--resume"});
  const Run b = run_program(mpirun(3, second), "resume_second");
  REQUIRE_MESSAGE(b.code == 0, b.err);
  CHECK(last_line(b.out).find("\"total_steps\":20") != std::string::npos);
  const std::string saved = workspace() / "resumed_30.mirra";
  std::vector<std::string> third = common;
  third.insert(third.end(), {"--steps", "30", "--strategy", "one_device", "--devices", "cpu:0", "--checkpoint-dir", dir,
                             "--resume", "--save", saved});
  REQUIRE(run(third, "resume_third").code == 0);
  check_close(trained_values(saved), trained_values(reference_file), 1e-5);
}

TEST_CASE("MultiWorker.each_worker_traces_its_all_reduces_in_phases") {
  const std::string trace = workspace() / "trace.json";
  const Run r = run_program(mpirun(2, {"train", mlp_file(), "--strategy", "multi_worker_mirrored", "--devices", "cpu:0", "--steps",
                                       "3", "--batch-size", "32", "--trace", trace}),
                            "trace");
  REQUIRE_MESSAGE(r.code == 0, r.err);
  for (const char* worker : {".worker0", ".worker1"}) {
    CAPTURE(worker);
    const std::string text = read_text(trace + worker);
    for (const char* phase : {"local reduce all_reduce/bucket_0", "waiting for workers all_reduce/bucket_0",
                              "all-reduce across workers all_reduce/bucket_0", "across workers (MPI)"}) {
      CHECK_MESSAGE(text.find(phase) != std::string::npos, phase);
    }
  }
}

// TensorBoard's event files come from worker 0, or with --logdir-per-worker from each worker into its
// own folder (tests/tensorboard reads what they hold).
TEST_CASE("MultiWorker.worker_0_or_every_worker_writes_event_files") {
  const auto event_files = [](const std::filesystem::path& dir) {
    size_t files = 0;
    if (!std::filesystem::exists(dir)) return files;
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
      files += entry.path().filename().string().starts_with("events.out.tfevents.") ? 1 : 0;
    }
    return files;
  };
  for (const bool per_worker : {false, true}) {
    CAPTURE(per_worker);
    const std::filesystem::path logdir = workspace() / (per_worker ? "logs_per_worker" : "logs");
    std::vector<std::string> args = {"train", mlp_file(), "--strategy", "multi_worker_mirrored", "--devices", "cpu:0",
                                     "--steps", "3", "--batch-size", "32", "--logdir", logdir.string()};
    if (per_worker) args.push_back("--logdir-per-worker");
    const Run r = run_program(mpirun(2, args), per_worker ? "logdir_per_worker" : "logdir");
    REQUIRE_MESSAGE(r.code == 0, r.err);
    if (per_worker) {
      CHECK(event_files(logdir / "train") == 0);
      CHECK(event_files(logdir / "worker_0" / "train") == 1);
      CHECK(event_files(logdir / "worker_1" / "train") == 1);
    } else {
      CHECK(event_files(logdir / "train") == 1);
      CHECK(!std::filesystem::exists(logdir / "worker_1"));
    }
  }
}

TEST_CASE("MultiWorker.a_worker_with_another_config_stops_every_worker") {
  // mpirun's MPMD form: worker 0 and worker 1 get different batch sizes.
  const std::vector<std::string> argv = {MIRRA_MPIRUN, "--allow-run-as-root", "--oversubscribe",
                                         "-np", "1", MIRRA_RUNNER, "train", mlp_file(), "--strategy", "multi_worker_mirrored",
                                         "--devices", "cpu:0", "--steps", "5", "--batch-size", "64", ":",
                                         "-np", "1", MIRRA_RUNNER, "train", mlp_file(), "--strategy", "multi_worker_mirrored",
                                         "--devices", "cpu:0", "--steps", "5", "--batch-size", "32"};
  const Run r = run_program(argv, "mismatch");
  CHECK(r.code != 0);
  CHECK_MESSAGE(r.err.find("worker 1's config differs from worker 0's") != std::string::npos, r.err);
  CHECK_MESSAGE(r.err.find("\"batch_size\": 32") != std::string::npos, r.err);
}

TEST_CASE("MultiWorker.no_deadlock_over_1000_short_steps_with_many_small_buckets") {
  // Every gradient its own bucket, and the batch size and metrics collectives besides: 9 collective
  // groups per step, completing in whatever order each worker's executor reaches them.
  const std::string config = workspace() / "small_buckets.json";
  std::ofstream(config) << R"({"strategy": "multi_worker_mirrored", "all_reduce": {"bucket_mb": 0.0001, "first_bucket_mb": 0.0001, "timeout_s": 60}})";
  const Run r = run_program(mpirun(3, {"train", mlp_file(), "--config", config, "--devices", "cpu:0,cpu:1", "--steps", "1000",
                                       "--batch-size", "8", "--threads", "1", "--json"}),
                            "many_steps");
  REQUIRE_MESSAGE(r.code == 0, r.err);
  CHECK(last_line(r.out).find("\"total_steps\":1000") != std::string::npos);
}

// The pids of mpirun's children (the workers).
std::vector<pid_t> workers_of(pid_t mpirun_pid) {
  std::vector<pid_t> pids;
  std::ifstream children("/proc/" + std::to_string(mpirun_pid) + "/task/" + std::to_string(mpirun_pid) + "/children");
  for (pid_t pid = 0; children >> pid;) pids.push_back(pid);
  return pids;
}

// The MPI rank mpirun gave a worker (its environment says).
int rank_of(pid_t pid) {
  std::ifstream environ("/proc/" + std::to_string(pid) + "/environ");
  const std::string key = "OMPI_COMM_WORLD_RANK=";
  for (std::string entry; std::getline(environ, entry, '\0');) {
    if (entry.starts_with(key)) return std::stoi(entry.substr(key.size()));
  }
  return -1;
}

// Alive: neither gone nor a zombie waiting for a parent to reap it.
bool running(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string pid_field, command, state;
  if (!(stat >> pid_field >> command >> state)) return false;
  return state != "Z" && state != "X";
}

// Starts 3 workers on a long run with a 5 s collective deadline, sends `signal` to worker 1 once they
// train, and checks that the run ends non-zero within the deadline (and a margin) with no worker left.
void check_lost_worker(int signal, const std::string& tag) {
  const std::string config = workspace() / "short_deadline.json";
  std::ofstream(config) << R"({"strategy": "multi_worker_mirrored", "all_reduce": {"timeout_s": 5}})";
  const Process p = spawn_program(mpirun(3, {"train", mlp_file(), "--config", config, "--devices", "cpu:0", "--steps", "1000000",
                                             "--batch-size", "32", "--threads", "1", "--metrics", workspace() / (tag + ".jsonl")}),
                                  tag);
  // Training has started once the metrics file has a line.
  const auto started = std::chrono::steady_clock::now();
  while (read_text(workspace() / (tag + ".jsonl")).find('\n') == std::string::npos) {
    REQUIRE_MESSAGE(std::chrono::steady_clock::now() - started < 60s, "the workers did not start training: " << read_text(p.err));
    std::this_thread::sleep_for(50ms);
  }
  const std::vector<pid_t> workers = workers_of(p.pid);
  REQUIRE(workers.size() == 3);
  const auto worker_1 = std::find_if(workers.begin(), workers.end(), [](pid_t pid) { return rank_of(pid) == 1; });
  REQUIRE(worker_1 != workers.end());
  REQUIRE(::kill(*worker_1, signal) == 0);
  const std::optional<int> code = wait_for(p, 30s);
  REQUIRE_MESSAGE(code.has_value(), "the run did not end after a worker was lost");
  CHECK(*code != 0);
  std::this_thread::sleep_for(200ms);
  for (pid_t pid : workers) CHECK_FALSE(running(pid));
  MESSAGE(tag << ": " << read_text(p.err));
}

TEST_CASE("MultiWorker.a_killed_worker_ends_the_run") { check_lost_worker(SIGKILL, "killed"); }

TEST_CASE("MultiWorker.a_stalled_worker_ends_the_run_at_the_deadline") {
  check_lost_worker(SIGSTOP, "stalled");
  CHECK(read_text(workspace() / "stalled.err").find("worker 1 of 3 did not take part within") != std::string::npos);
}

}  // namespace
}  // namespace mirra::runner::test
