// The runner on data sets of the user's own: Fashion-MNIST written by numpy as .npz archives trains
// to the very losses of its IDX files (the same images in the same order, scaled the same way), on
// one device and Mirrored over two, and so does a TFRecord file of PNG images TensorFlow wrote; a
// folder of images by class trains a classifier;
// evaluates from a deflated archive whose fields the config maps;
// linear regression on a CSV file written by numpy reaches numpy's least-squares solution, on one
// device and Mirrored; a bigram language model learns a token file written by numpy, Mirrored as on
// one device; mirra predict writes what a session computes, on one device or split over two;
// a model of two inputs trains on CSV columns, Mirrored as on one device; and every mistake in naming
// the data is an error that names it, before any step runs.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>

#include "examples/example_models.h"
#include "ops/ops.h"
#include "runtime/data/numpy_file.h"
#include "runtime/session.h"
#include "serialization/model_file.h"
#include "tools/mirra/variables_io.h"
#include "runtime/data/fashion_mnist.h"
#include "tests/runner/runner_process.h"
#include "tests/tfrecord_writer.h"

namespace mirra::runner {
namespace {

using test::kSanitized;
using test::run;
using test::Run;
using test::workspace;
using test::Process;
using test::read_text;
using test::spawn_program;
using test::trained_values;
using test::wait_for;

// train.npz and test.npz, written by numpy once.
const std::string& npz_dir() {
  static const std::string dir = [] {
    const std::string command = std::string(MIRRA_SYSTEM_PYTHON) + " " + MIRRA_SOURCE_DIR + "/tests/runner/fashion_mnist_npz.py " +
                                runtime::data::kFashionMnistDir + " " + workspace().dir.string();
    REQUIRE_MESSAGE(std::system(command.c_str()) == 0, command);
    return workspace().dir.string();
  }();
  return dir;
}

std::string config_file(const std::string& name, const std::string& text) {
  const std::string path = workspace() / name;
  std::ofstream(path) << text;
  return path;
}

// The images scaled by 1/255 as the IDX files' are, the labels as they are.
std::string npz_config() {
  return config_file("npz.json", R"({"data": {"train": {"files": [")" + npz_dir() + R"(/train.npz"],
    "fields": {"images": {"field": "images", "scale": 0.00392156862745098}, "labels": "labels"}},
    "eval": {"format": "numpy", "files": [")" + npz_dir() + R"(/test.npz"], "fields": {"images": "x", "labels": "y"}},
    "threads": 2}})");
}

TEST_CASE("Runner.data.an_npz_trains_as_the_idx_files_of_the_same_images") {
  for (const char* strategy : {"one_device", "mirrored"}) {
    CAPTURE(strategy);
    const std::string tag = std::string("npz_") + strategy;
    const Run idx = run(test::train_args({"--strategy", strategy, "--steps", "30", "--json"}), tag + "_idx");
    const Run npz = run(test::train_args({"--strategy", strategy, "--steps", "30", "--json", "--config", npz_config()}), tag);
    REQUIRE_MESSAGE(idx.code == 0, idx.err);
    REQUIRE_MESSAGE(npz.code == 0, npz.err);
    const auto loss = [](const Run& r) { return nlohmann::json::parse(test::last_line(r.out)).at("final_loss").get<double>(); };
    CHECK(loss(npz) == loss(idx));
  }
}

TEST_CASE("Runner.data.a_tfrecord_file_written_by_tensorflow_trains_as_the_same_examples_in_an_npz") {
  const std::string dir = workspace().dir.string();
  const std::string command = std::string(MIRRA_SYSTEM_PYTHON) + " " + MIRRA_SOURCE_DIR + "/tests/runner/fashion_mnist_600_npz.py " +
                              runtime::data::kFashionMnistDir + " " + dir;
  REQUIRE_MESSAGE(std::system(command.c_str()) == 0, command);
  const std::string tfrecord = std::string(MIRRA_SOURCE_DIR) + "/tests/runtime/tfrecord_reference/fashion_mnist_600.tfrecord";
  const std::string from_tfrecord = config_file("tfrecord.json", R"({"data": {"train": {"files": [")" + tfrecord + R"("],
    "features": {"image": {"type": "bytes", "shape": [28, 28, 1], "decode": "image"}, "label": {"type": "int64"}},
    "fields": {"images": {"field": "image", "scale": 0.00392156862745098}, "labels": "label"}}}})");
  const std::string from_npz = config_file("npz_600.json", R"({"data": {"train": {"files": [")" + dir + R"(/fashion_mnist_600.npz"],
    "fields": {"images": {"field": "images", "scale": 0.00392156862745098}, "labels": "labels"}}}})");
  for (const char* strategy : {"one_device", "mirrored"}) {
    CAPTURE(strategy);
    const Run a = run(test::train_args({"--strategy", strategy, "--epochs", "2", "--json", "--config", from_tfrecord}), "tfrecord_600");
    const Run b = run(test::train_args({"--strategy", strategy, "--epochs", "2", "--json", "--config", from_npz}), "npz_600");
    REQUIRE_MESSAGE(a.code == 0, a.err);
    REQUIRE_MESSAGE(b.code == 0, b.err);
    const auto summary = [](const Run& r) { return nlohmann::json::parse(test::last_line(r.out)); };
    CHECK(summary(a).at("examples").get<int64_t>() == 1200);
    CHECK(summary(a).at("final_loss").get<double>() == summary(b).at("final_loss").get<double>());
  }
  // A flipped byte in the data of a record: training stops at it, naming it, or leaves it out with
  // data.skip_corrupt and says so.
  std::ifstream in(tfrecord, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  bytes[1000] ^= 0x20;
  std::ofstream(dir + "/damaged.tfrecord", std::ios::binary) << bytes;
  std::string damaged = test::read_text(from_tfrecord);
  damaged.replace(damaged.find(tfrecord), tfrecord.size(), dir + "/damaged.tfrecord");
  const Run stopped = run(test::train_args({"--epochs", "1", "--config", config_file("damaged.json", damaged)}), "tfrecord_damaged");
  CHECK(stopped.code == 2);
  CHECK(stopped.err.find("damaged.tfrecord', record 1 at byte ") != std::string::npos);
  CHECK(stopped.err.find(": corrupt (its data's CRC-32C does not match)") != std::string::npos);
  damaged.replace(damaged.find("\"data\": {"), 9, "\"data\": {\"skip_corrupt\": true, ");
  const Run skipping = run(test::train_args({"--epochs", "1", "--json", "--config", config_file("skipping.json", damaged)}),
                           "tfrecord_skipping");
  REQUIRE_MESSAGE(skipping.code == 0, skipping.err);
  CHECK(skipping.err.find("warning: 1 corrupt record left out of the data (data.skip_corrupt)") != std::string::npos);
  CHECK(nlohmann::json::parse(test::last_line(skipping.out)).at("skipped_records").get<int64_t>() == 1);
  CHECK(nlohmann::json::parse(test::last_line(skipping.out)).at("examples").get<int64_t>() == 599);
}

TEST_CASE("Runner.data.a_folder_of_images_by_class_trains_a_classifier") {
  const std::string folder = std::string(MIRRA_SOURCE_DIR) + "/tests/runtime/image_folder_reference/images";
  const std::string config = config_file("images.json", R"({"data": {"train": {"files": [")" + folder + R"("],
    "images": {"size": [28, 28], "channels": 1}}}})");
  const Run r = run(test::train_args({"--epochs", "3", "--json", "--config", config}), "image_folder");
  REQUIRE_MESSAGE(r.code == 0, r.err);
  const nlohmann::json summary = nlohmann::json::parse(test::last_line(r.out));
  CHECK(summary.at("examples").get<int64_t>() == 15);  // 5 images, 3 epochs
  const Run shorthand = run(test::train_args({"--steps", "1", "--data", folder}), "image_folder_shorthand");
  CHECK(shorthand.code == 2);
  CHECK(shorthand.err.find("holds no Fashion-MNIST files; as a folder of images by class it needs the size") != std::string::npos);
}

TEST_CASE("Runner.data.evaluation_reads_a_deflated_archive_through_the_configs_fields") {
  const Run trained = run(test::train_args({"--steps", "40", "--eval", "--json", "--config", npz_config(),
                                            "--save", workspace() / "npz_trained.mirra"}),
                          "npz_eval");
  REQUIRE_MESSAGE(trained.code == 0, trained.err);
  const nlohmann::json summary = nlohmann::json::parse(test::last_line(trained.out));
  CHECK(summary.at("test_accuracy").get<double>() > 0.6);
  // mirra eval on the same data, named by --data (its arrays named x and y are not placeholders: refused),
  // and on the IDX files' test split, which holds the same examples.
  const Run unnamed = run({"eval", workspace() / "npz_trained.mirra", "--data", npz_dir() + "/test.npz"}, "npz_eval_unnamed");
  CHECK(unnamed.code == 2);
  CHECK(unnamed.err.find("none of its fields (x: f32[28,28,1], y: i64[]) is named as a placeholder of the model") != std::string::npos);
  const Run idx = run({"eval", workspace() / "npz_trained.mirra", "--json"}, "npz_eval_idx");
  REQUIRE_MESSAGE(idx.code == 0, idx.err);
  CHECK(nlohmann::json::parse(test::last_line(idx.out)).at("test_accuracy").get<double>() ==
        doctest::Approx(summary.at("test_accuracy").get<double>()).epsilon(1e-6));
}

TEST_CASE("Runner.data.linear_regression_on_a_csv_file_reaches_the_least_squares_solution") {
  const std::string dir = workspace().dir.string();
  const std::string command = std::string(MIRRA_SYSTEM_PYTHON) + " " + MIRRA_SOURCE_DIR + "/tests/runner/regression_csv.py " + dir;
  REQUIRE_MESSAGE(std::system(command.c_str()) == 0, command);
  auto linear = examples::build_example_model("linear", 1, {.features = 3});
  REQUIRE(linear.ok());
  REQUIRE(serialization::save_model(*linear, workspace() / "linear.mirra").ok());
  // Full batches: gradient descent on a convex quadratic, which converges to its one minimum.
  const std::string csv = R"({"files": [")" + dir + R"(/regression.csv"], "columns": {"inputs": ["x1", "x2", "x3"], "targets": ["y"]}})";
  const std::string config = config_file("regression.json", R"({"data": {"train": )" + csv + R"(, "eval": )" + csv + R"(},
    "training": {"batch_size": 1000, "epochs": 400, "learning_rate": 0.05}})");
  std::ifstream solution_file(dir + "/least_squares.json");
  const nlohmann::json solution = nlohmann::json::parse(solution_file);
  for (const char* strategy : {"one_device", "mirrored"}) {
    CAPTURE(strategy);
    const std::string saved = workspace() / (std::string("linear_") + strategy + ".mirra");
    const Run r = run({"train", workspace() / "linear.mirra", "--config", config, "--strategy", strategy, "--save", saved, "--eval", "--json"},
                      std::string("linear_") + strategy);
    REQUIRE_MESSAGE(r.code == 0, r.err);
    const nlohmann::json summary = nlohmann::json::parse(test::last_line(r.out));
    CHECK_FALSE(summary.contains("test_accuracy"));  // a regression counts no correct predictions
    CHECK(summary.at("test_loss").get<double>() < 0.011);   // the noise's variance, 0.01, and a little
    const auto trained = test::trained_values(saved);
    const std::span<const float> w = trained.at("linear/w").values<float>(), b = trained.at("linear/b").values<float>();
    for (size_t i = 0; i < 3; ++i) CHECK(w[i] == doctest::Approx(solution["w"][i].get<double>()).epsilon(1e-3));
    CHECK(b[0] == doctest::Approx(solution["b"].get<double>()).epsilon(1e-3));
  }
}

// Sanitizer runtimes reserve terabytes of shadow memory, which no data limit admits (kSanitized).
TEST_CASE("Runner.data.a_gzip_tfrecord_data_set_larger_than_the_memory_limit_streams_and_trains" * doctest::skip(kSanitized)) {
  // 5,120 examples of 65,536 floats (1.25 GiB inflated, a few MB compressed), each with 8 features set
  // among 512 places; the target is those features weighted, a linear function to learn.
  constexpr int64_t kFeatures = 65536, kExamples = 5120, kLimitMiB = 512;
  const std::string data = workspace() / "large.tfrecord.gz";
  {
    ::mirra::test::TfRecordWriter out(data, true);
    std::vector<float> x(kFeatures, 0.0f);
    for (int64_t i = 0; i < kExamples; ++i) {
      float y = 0;
      std::vector<int64_t> set;
      for (int64_t k = 0; k < 8; ++k) {
        const int64_t place = ((i * 8 + k) * 37 % 512) * (kFeatures / 512);
        x[static_cast<size_t>(place)] = static_cast<float>(1 + k % 3);
        y += static_cast<float>((place / 128 % 7) - 3) * 0.1f * x[static_cast<size_t>(place)];
        set.push_back(place);
      }
      const float target[] = {y};
      out.write(::mirra::test::TfExampleBuilder().floats("x", x).floats("y", target).bytes());
      for (int64_t place : set) x[static_cast<size_t>(place)] = 0.0f;
    }
  }
  auto linear = examples::build_example_model("linear", 1, {.features = kFeatures});
  REQUIRE(linear.ok());
  REQUIRE(serialization::save_model(*linear, workspace() / "wide_linear.mirra").ok());
  // Its name says the format and the compression.
  const std::string config = config_file("large.json", R"({"data": {"train": {"files": [")" + data + R"("],
      "features": {"x": {"type": "float", "shape": [65536]}, "y": {"type": "float", "shape": [1]}},
      "fields": {"inputs": "x", "targets": "y"}}, "shuffle_buffer": 64},
    "training": {"batch_size": 64, "epochs": 1, "learning_rate": 0.02}})");
  // The limit holds: a program that touches more than it is stopped.
  const auto limited = [&](std::vector<std::string> argv, const std::string& tag) {
    argv.insert(argv.begin(), {"/bin/sh", "-c", "ulimit -d " + std::to_string(kLimitMiB * 1024) + " && exec \"$0\" \"$@\""});
    const Process p = spawn_program(argv, tag);
    return std::make_pair(wait_for(p), read_text(p.err));
  };
  CHECK(limited({MIRRA_SYSTEM_PYTHON, "-c", "b = bytearray(1 << 30)"}, "over_the_limit").first != 0);
  const std::string metrics = workspace() / "large_metrics.jsonl";
  const std::pair<int, std::string> trained =
      limited({MIRRA_RUNNER, "train", workspace() / "wide_linear.mirra", "--config", config, "--metrics", metrics}, "larger_than_memory");
  REQUIRE_MESSAGE(trained.first == 0, trained.second);
  const std::vector<double> losses = test::step_losses(metrics);
  REQUIRE(losses.size() == kExamples / 64);
  CHECK(losses.back() < 0.2 * losses.front());
}

TEST_CASE("Runner.data.a_language_model_trains_on_token_windows_as_one_device_does") {
  const std::string dir = workspace().dir.string();
  const std::string command = std::string(MIRRA_SYSTEM_PYTHON) + " " + MIRRA_SOURCE_DIR + "/tests/runner/tokens_bin.py " + dir;
  REQUIRE_MESSAGE(std::system(command.c_str()) == 0, command);
  auto bigram = examples::build_example_model("bigram", 1, {.vocab = 50, .context = 16});
  REQUIRE(bigram.ok());
  REQUIRE(serialization::save_model(*bigram, workspace() / "bigram.mirra").ok());
  const std::string tokens = R"({"format": "tokens", "files": [")" + dir + R"(/tokens.bin"], "tokens": {"type": "u16", "context": 16}})";
  const std::string config = config_file("tokens.json", R"({"data": {"train": )" + tokens + R"(, "eval": )" + tokens + R"(},
    "training": {"batch_size": 32, "steps": 150, "learning_rate": 0.5}})");
  std::map<std::string, double> final_loss;
  for (const char* strategy : {"one_device", "mirrored"}) {
    CAPTURE(strategy);
    const Run r = run({"train", workspace() / "bigram.mirra", "--config", config, "--strategy", strategy, "--eval", "--json"},
                      std::string("bigram_") + strategy);
    REQUIRE_MESSAGE(r.code == 0, r.err);
    const nlohmann::json summary = nlohmann::json::parse(test::last_line(r.out));
    final_loss[strategy] = summary.at("final_loss").get<double>();
    CHECK(summary.at("test_loss").get<double>() < 0.1);  // from ln 50 = 3.9: it learned the sequence
    // The perplexity is the exponential of the mean loss per token, over the tokens it counts: every
    // window's 16 targets.
    CHECK(summary.at("test_metrics").at("perplexity").get<double>() ==
          doctest::Approx(std::exp(summary.at("test_loss").get<double>())).epsilon(1e-12));
    const auto windows = static_cast<double>((std::filesystem::file_size(dir + "/tokens.bin") / 2 - 1) / 16);
    CHECK(summary.at("test_metrics").at("tokens").get<double>() == windows * 16);
  }
  CHECK(final_loss["mirrored"] == doctest::Approx(final_loss["one_device"]).epsilon(1e-5));
}

// A GPT with dropout, through the runner: the input pipeline feeds each window's key, so Mirrored
// over 2 and 3 replicas trains as one device does, and a run resumed mid-epoch ends with the very bits
// of the unbroken run.
TEST_CASE("Runner.data.a_gpt_with_dropout_trains_as_one_device_and_resumes_bit_for_bit") {
  const std::string dir = workspace().dir.string();
  const std::string command = std::string(MIRRA_SYSTEM_PYTHON) + " " + MIRRA_SOURCE_DIR + "/tests/runner/tokens_bin.py " + dir;
  REQUIRE_MESSAGE(std::system(command.c_str()) == 0, command);
  auto gpt = examples::build_example_model("gpt", 1, {.vocab = 50, .context = 16, .layers = 1, .heads = 2, .embedding = 16, .dropout = 0.2});
  REQUIRE_MESSAGE(gpt.ok(), gpt.status().to_string());
  REQUIRE(serialization::save_model(*gpt, workspace() / "gpt.mirra").ok());
  const std::string tokens = R"({"format": "tokens", "files": [")" + dir + R"(/tokens.bin"], "tokens": {"type": "u16", "context": 16}})";
  const std::string config = config_file("gpt_tokens.json", R"({"data": {"train": )" + tokens + R"(},
    "training": {"batch_size": 7, "learning_rate": 0.003, "deterministic": true}})");
  const auto train = [&](const std::string& strategy, const std::string& steps, const std::string& tag,
                         std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"train", workspace() / "gpt.mirra", "--config", config, "--strategy", strategy, "--steps", steps,
                                     "--json", "--save", workspace() / (tag + ".mirra")};
    args.insert(args.end(), extra.begin(), extra.end());
    const Run r = run(args, tag);
    REQUIRE_MESSAGE(r.code == 0, r.err);
    return nlohmann::json::parse(test::last_line(r.out)).at("final_loss").get<double>();
  };
  const double one = train("one_device", "12", "gpt_one");
  for (const char* devices : {"cpu:0,cpu:1", "cpu:0,cpu:1,cpu:2"}) {
    CAPTURE(devices);
    CHECK(train("mirrored", "12", std::string("gpt_mirrored_") + devices, {"--devices", devices}) == doctest::Approx(one).epsilon(1e-5));
  }
  const std::string ckpt = workspace() / "gpt_ckpt";
  train("one_device", "5", "gpt_first_part", {"--checkpoint-dir", ckpt});
  train("one_device", "12", "gpt_resumed", {"--checkpoint-dir", ckpt, "--resume"});
  CHECK(trained_values(workspace() / "gpt_one.mirra") == trained_values(workspace() / "gpt_resumed.mirra"));
}

// A model of two inputs, prediction = a * wa + b * wb over a [?, 3] and b [?, 2], trained on the mean
// squared error against y [?, 1]: every placeholder carries the batch.
std::string two_input_model() {
  serialization::Model model;
  graph::Builder b(model.graph, ops::registry(), 1);
  const graph::ValueRef a = ops::placeholder(b, "a", graph::DType::f32, {-1, 3});
  const graph::ValueRef c = ops::placeholder(b, "b", graph::DType::f32, {-1, 2});
  const graph::ValueRef prediction =
      ops::add(b, ops::matmul(b, a, ops::variable(b, "wa", {3, 1}, ops::Initializer::zeros())),
               ops::matmul(b, c, ops::variable(b, "wb", {2, 1}, ops::Initializer::zeros())));
  const ops::RegressionObjective objective = ops::regression_objective(b, prediction, "y");
  REQUIRE(b.status().ok());
  const ops::Optimizer optimizer = ops::Optimizer::sgd(0.1);
  model.signature = {.features = "a", .labels = "y", .loss = objective.loss,
                     .optimizer = {.kind = optimizer.kind, .hyper_parameters = ops::optimizer_hyper_parameters(optimizer)}};
  for (const char* name : {"wa", "wb"}) {
    model.weights.push_back({name, graph::TensorValue::from<float>(model.graph.type({*model.graph.find(name), 0}).shape,
                                                                   std::vector<float>(name == std::string("wa") ? 3 : 2, 0.0f))});
  }
  const std::string path = workspace() / "two_inputs.mirra";
  REQUIRE(serialization::save_model(model, path).ok());
  return path;
}

TEST_CASE("Runner.data.a_model_of_two_inputs_trains_on_csv_columns_as_one_device_does") {
  const std::string csv = workspace() / "two_inputs.csv";
  {
    std::ofstream out(csv);
    out << "a1,a2,a3,b1,b2,y\n";
    for (int i = 0; i < 200; ++i) {
      const double a1 = std::sin(i), a2 = std::cos(3 * i), a3 = (i % 7) / 7.0, b1 = std::sin(0.5 * i), b2 = (i % 3) - 1.0;
      out << a1 << "," << a2 << "," << a3 << "," << b1 << "," << b2 << "," << (0.5 * a1 - a2 + 2 * a3 + 1.5 * b1 - 0.25 * b2) << "\n";
    }
  }
  const std::string config = config_file("two_inputs.json", R"({"data": {"train": {"files": [")" + csv + R"("],
    "columns": {"a": ["a1", "a2", "a3"], "b": ["b1", "b2"], "y": ["y"]}}}, "training": {"batch_size": 20, "epochs": 30}})");
  const std::string model = two_input_model();
  std::map<std::string, std::map<std::string, graph::TensorValue>> trained;
  for (const char* strategy : {"one_device", "mirrored"}) {
    CAPTURE(strategy);
    const std::string saved = workspace() / (std::string("two_inputs_") + strategy + ".mirra");
    const Run r = run({"train", model, "--config", config, "--strategy", strategy, "--save", saved, "--deterministic"},
                      std::string("two_inputs_") + strategy);
    REQUIRE_MESSAGE(r.code == 0, r.err);
    trained[strategy] = test::trained_values(saved);
  }
  test::check_close(trained["mirrored"], trained["one_device"], 1e-5);
  // The weights that made y, learned.
  const std::span<const float> wa = trained["one_device"].at("wa").values<float>(), wb = trained["one_device"].at("wb").values<float>();
  CHECK(wa[0] == doctest::Approx(0.5).epsilon(1e-2));
  CHECK(wa[2] == doctest::Approx(2.0).epsilon(1e-2));
  CHECK(wb[0] == doctest::Approx(1.5).epsilon(1e-2));
}

// The first `n` test images of Fashion-MNIST as the classifiers take them.
runtime::Tensor test_images(int64_t n) {
  auto data = runtime::data::load_fashion_mnist(runtime::data::kFashionMnistDir, runtime::data::Split::test);
  REQUIRE(data.ok());
  std::vector<float> pixels(static_cast<size_t>(n * 784));
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<float>(data->images.values[i]) * static_cast<float>(1.0 / 255.0);
  return runtime::Tensor::from<float>({n, 28, 28, 1}, pixels);
}

TEST_CASE("Runner.predict.writes_what_a_session_computes_on_one_device_or_several") {
  const std::string model_path = workspace() / "predicted.mirra";
  const Run trained = run(test::train_args({"--steps", "20", "--save", model_path}), "predict_train");
  REQUIRE_MESSAGE(trained.code == 0, trained.err);
  const Run one = run({"predict", model_path, "--outputs", "logits/BiasAdd", "--out", workspace() / "logits.npy", "--batch-size", "768"},
                      "predict_one");
  REQUIRE_MESSAGE(one.code == 0, one.err);
  CHECK(one.out.find("wrote 1 output of 10000 examples to") != std::string::npos);
  const Run two = run({"predict", model_path, "--outputs", "logits/BiasAdd,objective/ArgMax", "--out", workspace() / "both.npz",
                       "--devices", "cpu:0,cpu:1"},
                      "predict_two");
  REQUIRE_MESSAGE(two.code == 0, two.err);

  // The same logits from a session of the saved model, in this process, over predict's first batch
  // of 768 (a product's rounding may depend on its rows, as oneDNN's does on AVX2 machines).
  auto model = serialization::load_model(model_path, ops::registry());
  REQUIRE(model.ok());
  runtime::Session session(model->graph, ops::kernels());
  REQUIRE(write_variables(session, model->weights, /*require_all=*/false, "the saved model").ok());
  const graph::ValueRef logits{*model->graph.find("logits/BiasAdd"), 0};
  auto want = session.run({{"images", test_images(768)}}, {logits});
  REQUIRE(want.ok());
  auto written = runtime::data::read_npy(workspace() / "logits.npy");
  REQUIRE(written.ok());
  CHECK(written->shape == std::vector<int64_t>{10000, 10});
  CHECK(std::memcmp(written->data, (*want)[0].raw_data(), (*want)[0].byte_size()) == 0);
  auto both = runtime::data::read_npz(workspace() / "both.npz");
  REQUIRE(both.ok());
  REQUIRE(both->size() == 2u);
  CHECK((*both)[0].first == "logits/BiasAdd");
  // Two devices split each batch in other rows: the same logits up to rounding.
  const auto* split_logits = reinterpret_cast<const float*>((*both)[0].second.data);
  const auto* whole_logits = reinterpret_cast<const float*>(written->data);
  double worst = 0;
  for (size_t i = 0; i < 10000 * 10; ++i) {
    worst = std::max(worst, std::abs(double{split_logits[i]} - whole_logits[i]) / std::max(1.0, std::abs(double{whole_logits[i]})));
  }
  CHECK(worst <= 1e-5);
  CHECK((*both)[1].second.type == runtime::data::ElementType::i64);
  CHECK((*both)[1].second.shape == std::vector<int64_t>{10000});

  const auto refused = [&](std::vector<std::string> args, const std::string& message) {
    CAPTURE(message);
    args.insert(args.begin(), {"predict", model_path});
    const Run r = run(args, "predict_refused");
    CHECK(r.code == 2);
    CHECK(r.err.find(message) != std::string::npos);
  };
  refused({"--outputs", "logits/BiasAdd", "--out", workspace() / "p.txt"}, "must name an .npy or .npz file");
  refused({"--outputs", "logits/Softmax", "--out", workspace() / "p.npy"}, "--outputs: the model has no node 'logits/Softmax'");
  refused({"--outputs", "logits/BiasAdd:3", "--out", workspace() / "p.npy"}, "has 1 outputs, not an output 3");
  refused({"--outputs", "objective/ReduceMean", "--out", workspace() / "p.npy"}, "not one row per example");
  refused({"--outputs", "logits/BiasAdd,objective/ArgMax", "--out", workspace() / "p.npy"}, "an .npy file holds one output");
}

TEST_CASE("Runner.data.mistakes_in_naming_the_data_are_errors_before_training") {
  const std::string train = npz_dir() + "/train.npz";
  struct Case {
    std::string config;
    std::vector<std::string> extra;
    std::string message;
  };
  const std::vector<Case> cases = {
      {R"({"data": {"train": {"files": [")" + train + R"("], "fields": {"images": "pixels", "labels": "labels"}}}})", {},
       "has no field 'pixels' (its fields: images: u8[28,28,1], labels: u8[])"},
      {R"({"data": {"train": {"files": [")" + train + R"("], "fields": {"inputs": "images", "labels": "labels"}}}})", {},
       "field 'images' feeding 'inputs': the model has no placeholder 'inputs' (its placeholders: 'images' (f32[?,28,28,1]), "
       "'labels' (i64[?]))"},
      {R"({"data": {"train": {"files": [")" + train + R"("], "fields": {"labels": "labels"}}}})", {},
       "the training step needs placeholder 'images' (f32[?,28,28,1]), which nothing feeds: the batches feed 'labels'"},
      {R"({"data": {"train": {"files": [")" + train + R"("], "fields": {"images": {"field": "labels", "one_hot": 10}, "labels": "labels"}}}})", {},
       "field 'labels' feeding 'images': the field's 10 values per example (labels: u8[], one-hot) do not make [28,28,1]"},
      {R"({"data": {"train": {"files": [")" + train + R"("]}}})", {"--eval"},
       "evaluation needs its own data set: name it in the config's data.eval"},
      {R"({"data": {"train": {"files": ["x.txt"]}}})", {}, "'data.train.format' is needed"},
      {R"({"data": {"train": {"format": "parquet", "files": ["x"]}}})", {},
       "'data.train.format' must be \"fashion_mnist\", \"numpy\", \"csv\", \"tokens\", \"tfrecord\" or \"images\""},
      {R"({"data": {"train": {"format": "images", "files": ["x"]}}})", {}, "'data.train.images' must say the size the images are resized to"},
      {R"({"data": {"train": {"format": "images", "files": ["x"], "images": {"size": [0, 3]}}}})", {},
       "'data.train.images.size' must be [height, width], each in [1, 65536]"},
      {R"({"data": {"train": {"files": ["a.tfrecord"]}}})", {}, "'data.train.features' must name the features a TFRecord data set reads"},
      {R"({"data": {"train": {"files": ["a.tfrecord"], "features": {"x": {"type": "string"}}}}})", {},
       "'data.train.features.x.type' must be \"int64\", \"float\" or \"bytes\""},
      {R"({"data": {"train": {"files": ["a.npz"], "compression": "gzip"}}})", {}, "'data.train.compression' applies to TFRecord files only"},
      {R"({"data": {"train": {"format": "tokens", "files": ["x.bin"]}}})", {}, "'data.train.tokens' must say how the token file is cut into windows"},
      {R"({"data": {"train": {"format": "tokens", "files": ["x.bin"], "tokens": {"type": "u16"}}}})", {}, "'data.train.tokens.context' must be a number of tokens"},
      {R"({"data": {"train": {"files": ["a.npz"], "tokens": {"context": 4}}}})", {}, "'data.train.tokens' applies to token files only"},
      {R"({"data": {"train": {"files": ["a.npz"], "columns": {"x": ["a"]}}}})", {}, "'data.train.columns' applies to csv files only"},
      {R"({"data": {"train": {"files": []}}})", {}, "'data.train.files' must name at least one file"},
      {R"({"data": {"train": {"files": ["a.npz"], "fields": {"images": {"field": "x", "stddev": [0]}}}}})", {},
       "'data.train.fields.images.stddev' must be a positive number"},
      {R"({"data": {"training": {}}})", {}, "unknown key 'data.training'"},
      {R"({"data": {"threads": 0}})", {}, "'data.threads' must be an integer in [1, 1024]"},
      {R"({"data": {"shuffle_buffer": 0}})", {}, "'data.shuffle_buffer' must be a positive integer (records)"},
      {R"({"data": {"shard": "files"}})", {}, "'data.shard' must be \"example\", \"file\" or \"auto\""},
  };
  int index = 0;
  for (const Case& c : cases) {
    CAPTURE(c.message);
    std::vector<std::string> args = test::train_args({"--steps", "1", "--config", config_file("bad_data_" + std::to_string(index) + ".json", c.config)});
    args.insert(args.end(), c.extra.begin(), c.extra.end());
    const Run r = run(args, "bad_data_" + std::to_string(index++));
    CHECK(r.code == 2);
    CHECK(r.err.find(c.message) != std::string::npos);
  }
  const Run shorthand = run(test::train_args({"--steps", "1", "--data", workspace() / "table.txt"}), "bad_data_shorthand");
  CHECK(shorthand.code == 2);
  CHECK(shorthand.err.find("is neither a directory of Fashion-MNIST's IDX files nor .npy/.npz or .csv files") != std::string::npos);
  const Run records = run(test::train_args({"--steps", "1", "--data", workspace() / "a.tfrecord"}), "bad_data_records");
  CHECK(records.code == 2);
  CHECK(records.err.find("TFRecord files need the features they hold named, in a config's data") != std::string::npos);
  const Run missing = run(test::train_args({"--steps", "1", "--data", workspace() / "table.csv"}), "bad_data_missing");
  CHECK(missing.code == 2);
  CHECK(missing.err.find("cannot open '" + (workspace() / "table.csv") + "': No such file or directory") != std::string::npos);
}

}  // namespace
}  // namespace mirra::runner
