// Gathers and scatter-adds: GatherV2 (TensorFlow's: rows of params along `axis` picked by integer
// indices; an embedding lookup) and UnsortedSegmentSum (TensorFlow's: rows of data added into
// num_segments rows by segment id; GatherV2's gradient). The sum adds each segment's rows in their
// order in data, on every device and thread count, so runs are reproducible.
#pragma once

#include <cstdint>

#include "graph/builder.h"

namespace mirra::ops {

using graph::Builder;
using graph::ValueRef;

// params' slices along `axis` at `indices` (i32 or i64): params.shape[:axis] + indices.shape +
// params.shape[axis + 1:]. An index outside [0, params.dim(axis)) is an error.
ValueRef gather(Builder& b, ValueRef params, ValueRef indices, int64_t axis = 0);
// [num_segments] + data.shape[segment_ids.rank:]: row s the sum of data's rows whose id is s
// (segment_ids' shape a prefix of data's). Negative ids are dropped; an id >= num_segments is an error.
ValueRef unsorted_segment_sum(Builder& b, ValueRef data, ValueRef segment_ids, int64_t num_segments);

}  // namespace mirra::ops
