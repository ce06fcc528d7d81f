// broadcast_shape.
#include "ops/cpu/broadcast.h"

namespace mirra::ops::cpu {

std::optional<runtime::TensorShape> broadcast_shape(const runtime::TensorShape& a, const runtime::TensorShape& b) {
  const int rank = std::max(a.rank(), b.rank());
  std::vector<int64_t> dims(static_cast<size_t>(rank));
  for (int d = 0; d < rank; ++d) {
    const int da = d - (rank - a.rank());
    const int db = d - (rank - b.rank());
    const int64_t dim_a = da >= 0 ? a.dim(da) : 1;
    const int64_t dim_b = db >= 0 ? b.dim(db) : 1;
    if (dim_a != dim_b && dim_a != 1 && dim_b != 1) return std::nullopt;
    dims[static_cast<size_t>(d)] = dim_a == 1 ? dim_b : dim_a;
  }
  return runtime::TensorShape(dims);
}

}  // namespace mirra::ops::cpu
