// deadline_after and the CollectiveSet table.
#include "runtime/collectives/collective.h"

namespace mirra::runtime {

CollectiveClock::time_point deadline_after(std::chrono::milliseconds timeout) {
  if (timeout.count() <= 0) return CollectiveClock::time_point::max();
  return CollectiveClock::now() + timeout;
}

graph::Expected<Collective*> CollectiveSet::find(std::string_view name) const {
  if (name == "auto" && !collectives_.empty()) return collectives_.front().get();
  std::string known;
  for (const auto& collective : collectives_) {
    if (collective->name() == name) return collective.get();
    known += (known.empty() ? "" : ", ") + std::string(collective->name());
  }
  return graph::not_found("no collective implementation '" + std::string(name) + "' in this session (there are: " +
                          (known.empty() ? std::string("none") : known) + ")");
}

}  // namespace mirra::runtime
