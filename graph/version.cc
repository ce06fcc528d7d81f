// mirra::version(): the version the library was built as.
#include "graph/version.h"

namespace mirra {

const char* version() { return MIRRA_VERSION_STRING; }

}  // namespace mirra
