// scaling_svg (`mirra simulate --plot FILE.svg`): a chart of a sweep, per algorithm, against the
// device count on a log scale: the scaling efficiency (solid) and the share of the step spent waiting
// for communication (dashed), both from 0 to 1.
#pragma once

#include <string>
#include <vector>

#include "simulate/scaling.h"

namespace mirra::simulate {

std::string scaling_svg(const std::vector<ScalingPoint>& points, const std::string& title);

}  // namespace mirra::simulate
