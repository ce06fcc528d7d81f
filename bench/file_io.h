// The model-file and checkpoint benchmark: saving and loading the CNN's model file (13 MB of weights)
// and a checkpoint of its weights and momentum slots (26 MB), each timed next to its peer in the same
// run: writing the same number of bytes with write + fsync + rename (the floor for a durable atomic
// save), and reading them back with read (the floor for a load). The ratio is what encoding,
// verification and CRC-32s cost on top of the I/O.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

namespace mirra::bench {

struct FileIoOptions {
  std::string directory = ".";  // where the files go (removed afterwards)
  int repetitions = 5;          // the best is reported
};

nlohmann::json run_file_io(const FileIoOptions& options);

}  // namespace mirra::bench
