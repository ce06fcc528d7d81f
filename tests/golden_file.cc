// source_file, and check_golden: compare with, or rewrite, a file of the source tree.
#include "tests/golden_file.h"

#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace mirra::test {

std::string source_file(const std::string& path) {
  const char* moved = std::getenv("MIRRA_SOURCE_DIR");
  return std::string(moved != nullptr && *moved != '\0' ? moved : MIRRA_SOURCE_DIR) + "/" + path;
}

void check_golden(const std::string& path, const std::string& text) {
  const std::string file = source_file(path);
  if (std::getenv("MIRRA_UPDATE_GOLDEN") != nullptr) {
    std::filesystem::create_directories(std::filesystem::path(file).parent_path());
    std::ofstream(file) << text;
    return;
  }
  std::ifstream in(file);
  REQUIRE_MESSAGE(in.good(), "missing golden file " << file << " (run with MIRRA_UPDATE_GOLDEN=1)");
  std::stringstream golden;
  golden << in.rdbuf();
  CHECK_MESSAGE(golden.str() == text, "the output differs from " << file << ":\n" << text);
}

}  // namespace mirra::test
