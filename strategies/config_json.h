// Helpers shared by the JSON config parsers (strategies/config.cc, tools/mirra/run_config.cc): errors
// that name the key and the source, strict key sets, and reading a config file whole.
#pragma once

#include <nlohmann/json.hpp>

#include <initializer_list>
#include <string>
#include <string_view>

#include "graph/status.h"
#include "strategies/config.h"

namespace mirra::strategies {

// "<source>: '<key>' <what>"
graph::Status config_key_error(std::string_view source, std::string_view key, const std::string& what);
// An error naming the first key of `object` not in `known` (prefixed, "all_reduce.") and the known ones.
graph::Status check_config_keys(const nlohmann::json& object, std::initializer_list<std::string_view> known,
                                std::string_view source, std::string_view prefix);
// The text as a JSON object, or an error naming `source`.
graph::Expected<nlohmann::json> parse_config_object(std::string_view json_text, std::string_view source);
// The strategy keys of an already parsed config object (strategy, devices, all_reduce; no others).
graph::Expected<StrategyConfig> strategy_config_from_json(const nlohmann::json& root, std::string_view source);

}  // namespace mirra::strategies
