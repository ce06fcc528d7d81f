// Files of the source tree that tests read, and golden files among them: text a test produces, pinned
// in the source tree. MIRRA_UPDATE_GOLDEN=1 rewrites them after an intended change (then review the
// diff); otherwise a difference fails the test and prints the new text.
#pragma once

#include <string>

namespace mirra::test {

// The file at `path` (relative to the source tree): under $MIRRA_SOURCE_DIR when that is set (the GPU
// bundle's copy of the files its tests read), else in the tree the tests were built from.
std::string source_file(const std::string& path);

// Checks `text` against the file at `path` (relative to the source tree, e.g. "tests/ops/golden/x.txt").
void check_golden(const std::string& path, const std::string& text);

}  // namespace mirra::test
