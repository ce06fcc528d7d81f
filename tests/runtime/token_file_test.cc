// Token windows: in order they cover the file; at random offsets they are drawn from (seed, epoch,
// example) alone and lie inside the file; every token type; bad files refused.
#include <doctest/doctest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "runtime/data/token_file.h"

namespace mirra::runtime::data {
namespace {

namespace fs = std::filesystem;

struct TokenDir {
  fs::path path = fs::temp_directory_path() / ("mirra_token_test_" + std::to_string(::getpid()));
  TokenDir() { fs::create_directories(path); }
  ~TokenDir() {
    std::error_code ignored;
    fs::remove_all(path, ignored);
  }
};

// Tokens 0, 1, ..., n - 1 of type T, written as numpy's tofile writes them.
template <class T>
std::string write_tokens(const TokenDir& dir, const std::string& name, int64_t n) {
  std::vector<T> tokens(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) tokens[static_cast<size_t>(i)] = static_cast<T>(i);
  const std::string path = (dir.path / name).string();
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(tokens.data()), static_cast<std::streamsize>(n * sizeof(T)));
  return path;
}

// Window `index`'s inputs and targets.
template <class T>
std::pair<std::vector<T>, std::vector<T>> window(const ExampleSource& source, int64_t index, Draw draw, int64_t context) {
  std::vector<T> inputs(static_cast<size_t>(context)), targets(static_cast<size_t>(context));
  std::byte* out[] = {reinterpret_cast<std::byte*>(inputs.data()), reinterpret_cast<std::byte*>(targets.data())};
  REQUIRE(source.read(index, draw, out).ok());
  return {inputs, targets};
}

TEST_CASE("TokenWindows.in_order_cover_the_file_and_targets_are_the_next_tokens") {
  const TokenDir dir;
  const std::string path = write_tokens<uint16_t>(dir, "train.bin", 1001);
  auto source = token_windows(path, {.type = ElementType::u16, .context = 10});
  REQUIRE(source.ok());
  CHECK((*source)->size() == 100);
  CHECK((*source)->fields()[0].to_string() == "inputs: u16[10]");
  CHECK((*source)->fields()[1].to_string() == "targets: u16[10]");
  for (int64_t i : {0, 57, 99}) {
    const auto [inputs, targets] = window<uint16_t>(**source, i, {}, 10);
    for (int64_t k = 0; k < 10; ++k) {
      CHECK(inputs[static_cast<size_t>(k)] == i * 10 + k);
      CHECK(targets[static_cast<size_t>(k)] == i * 10 + k + 1);
    }
  }
  CHECK((*source)->read(100, {}, {}).message() == "token file '" + path + "': window 100 of 100 does not exist");
}

TEST_CASE("TokenWindows.random_offsets_come_from_the_seed_epoch_and_example_alone") {
  const TokenDir dir;
  const std::string path = write_tokens<uint32_t>(dir, "train.bin", 500);
  auto source = token_windows(path, {.type = ElementType::u32, .context = 7, .random_offsets = true});
  REQUIRE(source.ok());
  std::set<uint32_t> starts;
  for (int64_t i = 0; i < (*source)->size(); ++i) {
    const auto [inputs, targets] = window<uint32_t>(**source, i, {.seed = 3, .epoch = 1}, 7);
    CHECK(inputs[0] + 7 <= 499);  // the window and its next token lie inside the file
    CHECK(targets[6] == inputs[6] + 1);
    starts.insert(inputs[0]);
    CHECK(window<uint32_t>(**source, i, {.seed = 3, .epoch = 1}, 7) == window<uint32_t>(**source, i, {.seed = 3, .epoch = 1}, 7));
  }
  CHECK(starts.size() > 30u);  // 71 windows drawn: spread over the file
  CHECK(window<uint32_t>(**source, 5, {.seed = 3, .epoch = 1}, 7) != window<uint32_t>(**source, 5, {.seed = 3, .epoch = 2}, 7));
  CHECK(window<uint32_t>(**source, 5, {.seed = 3, .epoch = 1}, 7) != window<uint32_t>(**source, 5, {.seed = 4, .epoch = 1}, 7));
}

TEST_CASE("TokenWindows.text_as_bytes") {
  const TokenDir dir;
  const std::string path = (dir.path / "text.txt").string();
  std::ofstream(path) << "hello, world";
  auto source = token_windows(path, {.type = ElementType::u8, .context = 5});
  REQUIRE(source.ok());
  CHECK((*source)->size() == 2);
  const auto [inputs, targets] = window<uint8_t>(**source, 1, {}, 5);
  CHECK(std::string(inputs.begin(), inputs.end()) == ", wor");
  CHECK(std::string(targets.begin(), targets.end()) == " worl");
}

TEST_CASE("TokenWindows.bad_files_are_refused") {
  const TokenDir dir;
  const std::string odd = (dir.path / "odd.bin").string();
  std::ofstream(odd) << "abc";
  CHECK(token_windows(odd, {.type = ElementType::u16, .context = 1}).status().message() ==
        "token file '" + odd + "': 3 bytes is not a whole number of u16 tokens (a truncated file, or another token type)");
  const std::string few = write_tokens<uint16_t>(dir, "few.bin", 4);
  CHECK(token_windows(few, {.type = ElementType::u16, .context = 4}).status().message() ==
        "token file '" + few + "': 4 tokens, fewer than one window of 4 + 1");
  CHECK(token_windows(few, {.type = ElementType::f32, .context = 1}).status().message() ==
        "token file '" + few + "': tokens are u8 (bytes of text), u16 or u32, not f32");
  CHECK(token_windows(few, {.type = ElementType::u16, .context = 0}).status().message() ==
        "token file '" + few + "': the context must be in [1, 16777216] tokens, not 0");
}

}  // namespace
}  // namespace mirra::runtime::data
