// visit_dtype: calls a templated lambda with the C++ type of a run-time DType, from a fixed list of
// supported types; any other dtype is an error naming it.
//
//   return visit_dtype<float, double>(x.dtype(), [&]<class T>(Type<T>) { ...; return Status(); });
#pragma once

#include <string>

#include "graph/dtype.h"
#include "graph/status.h"

namespace mirra::ops::cpu {

template <class T>
struct Type {
  using type = T;
};

template <class... Ts, class F>
graph::Status visit_dtype(graph::DType dtype, F&& f) {
  graph::Status result = graph::unimplemented("no kernel for dtype " + std::string(graph::dtype_name(dtype)));
  bool matched = false;
  ((!matched && graph::dtype_of<Ts>() == dtype ? (matched = true, result = f(Type<Ts>{}), 0) : 0), ...);
  return result;
}

}  // namespace mirra::ops::cpu
