// libFuzzer target: arbitrary text as a run config (strategy, devices, all-reduce, training and
// checkpoint keys). Parsing must return a config or an error, never crash; a config that parses must
// print as JSON that parses to the same config.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "tools/mirra/run_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace mirra;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto config = runner::parse_run_config(text, "fuzz input");
  if (config.ok()) {
    const std::string printed = runner::run_config_json(*config);
    auto again = runner::parse_run_config(printed, "printed fuzz input");
    if (!again.ok() || runner::run_config_json(*again) != printed) std::abort();
  }
  return 0;
}
