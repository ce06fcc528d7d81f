// Helpers shared by the JSON config parsers (strategies/config.cc, tools/mirra/run_config.cc): errors
// that name the key and the source, strict key sets, and reading a config file whole.
#pragma once

#include <nlohmann/json.hpp>

#include <initializer_list>
#include <string>
#include <string_view>

#include "graph/status.h"

namespace mirra::strategies {

// "<source>: '<key>' <what>"
graph::Status config_key_error(std::string_view source, std::string_view key, const std::string& what);
// An error naming the first key of `object` not in `known` (prefixed, "all_reduce.") and the known ones.
graph::Status check_config_keys(const nlohmann::json& object, std::initializer_list<std::string_view> known,
                                std::string_view source, std::string_view prefix);
// The file's text, or an error naming it as a `what` ("strategy config").
graph::Expected<std::string> read_config_file(const std::string& path, std::string_view what);

}  // namespace mirra::strategies
