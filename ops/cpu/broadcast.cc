// broadcast_shape and broadcast_strides.
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

void broadcast_strides(const runtime::TensorShape& in, const runtime::TensorShape& out, int64_t* strides) {
  const int rank = out.rank();
  int64_t stride = 1;
  for (int d = rank - 1; d >= 0; --d) {
    const int din = d - (rank - in.rank());
    const int64_t dim = din >= 0 ? in.dim(din) : 1;
    strides[d] = dim == 1 ? 0 : stride;
    stride *= dim;
  }
}

}  // namespace mirra::ops::cpu
