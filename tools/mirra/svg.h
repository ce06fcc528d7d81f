// render_svg (`mirra inspect --dot --svg FILE`): DOT rendered to an SVG file by Graphviz's `dot`.
#pragma once

#include <string>

#include "graph/status.h"

namespace mirra::runner {

// An error saying how to install Graphviz when `dot` is missing, or that it failed (its own messages
// go to stderr).
graph::Status render_svg(const std::string& dot, const std::string& path);

}  // namespace mirra::runner
