// Helpers for the runner's end-to-end tests: a scratch directory for the test binary, the example MLP
// as a model file, and the built `mirra` run as a child process with its output captured.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "graph/attr.h"

namespace mirra::runner::test {

// Whether this build runs under AddressSanitizer: tests that would take minutes there, or that
// limit memory (its shadow reserves terabytes), skip themselves (doctest::skip(kSanitized)).
#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kSanitized = true;
#elif defined(__has_feature)
inline constexpr bool kSanitized = __has_feature(address_sanitizer);
#else
inline constexpr bool kSanitized = false;
#endif

// A directory of its own for this test process, removed at exit.
struct Workspace {
  std::filesystem::path dir;
  Workspace();
  ~Workspace();
  std::string operator/(const std::string& name) const { return (dir / name).string(); }
};
const Workspace& workspace();

// The MLP from mirra-examples (seed 1), written once.
const std::string& mlp_file();
// ResNet-20 from mirra-examples (seed 1), written once; the same in float64.
const std::string& resnet20_file();
const std::string& resnet20_f64_file();
// The same MLP trained on a loss over [batch, classes] plus a weight decay: the mean squared error of
// its probabilities against the one-hot labels (a Brier score) + 1e-4 * sum(fc1/w ^ 2), written once.
const std::string& brier_mlp_file();
// The same MLP whose train step also writes state from the batch, one variable per aggregation:
// "stats/images_seen" (sum), "stats/mean_image" (a moving mean of the images, mean),
// "stats/first_image" (the batch's first image, only_first_replica) and "stats/mean_image_on_read"
// (the same moving mean, mean synchronised on read), written once.
const std::string& stats_mlp_file();

// The same MLP with a loss that leaves out the examples labelled 9: the cross-entropy of the others
// summed and divided by their count, declared as the signature's loss weight; its metrics are the
// accuracy over those examples ("kept_accuracy", a mean over the same weight) and their count
// ("kept", a sum). Written once.
const std::string& masked_mlp_file();

struct Process {
  pid_t pid = -1;
  std::string out, err;  // files holding its stdout and stderr
};

// Starts `mirra args...`; stdout goes to `stdout_fd` when given (a pipe, say), else to a file.
Process spawn(std::vector<std::string> args, const std::string& tag, int stdout_fd = -1);
// Starts the program argv[0] (a path) with its arguments, output as spawn's.
Process spawn_program(std::vector<std::string> argv, const std::string& tag, int stdout_fd = -1);
// The exit code, or 128 + the signal that ended it.
int wait_for(const Process& p);
// The same, or nullopt when it is still running after `limit` (it is then killed).
std::optional<int> wait_for(const Process& p, std::chrono::seconds limit);
std::string read_text(const std::string& path);

struct Run {
  int code;
  std::string out, err;
};
Run run(std::vector<std::string> args, const std::string& tag);

std::string last_line(const std::string& text);
// The loss of each step, from a --metrics file.
std::vector<double> step_losses(const std::string& path);
// Each line's number under `key` ("learning_rate").
std::vector<double> step_field(const std::string& path, const std::string& key);
// A metric of the signature at each step, by name, from a --metrics file.
std::vector<double> step_metric(const std::string& path, const std::string& name);
// Weights and optimizer state of a saved model, by name.
std::map<std::string, graph::TensorValue> trained_values(const std::string& path);
// The same values by name (f32, f64 or i64, each of one type on both sides), each within
// max |got - want| <= relative * max |want|.
void check_close(const std::map<std::string, graph::TensorValue>& got, const std::map<std::string, graph::TensorValue>& want,
                 double relative);

// Deterministic training on the MLP: `train MLP --deterministic --batch-size 32 --threads 2 extra...`.
std::vector<std::string> train_args(std::vector<std::string> extra);

}  // namespace mirra::runner::test
