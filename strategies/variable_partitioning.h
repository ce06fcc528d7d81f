// partition_variables: each trained variable above a size cut along axis 0 into parts (TensorFlow's
// MinSizePartitioner), so that a parameter server's strategy can place the parts on different
// servers. Part i of variable V is a Variable "V/part_i" holding rows [offset_i, offset_i + rows_i)
// (attrs partition_of and partition_offset: it starts as those rows of V's initial value); its
// optimizer slots are cut alike ("<slot>/part_i"), and V's update becomes one update per part, of
// the part's rows of V's gradient. Every other reader of V reads the parts joined (a Concat along
// axis 0). The optimizers' updates are elementwise, so a partitioned run computes what the whole
// variable's would, bit for bit. Checkpoints and model files hold V whole (tools/mirra joins the
// parts by name: strategies::partition_free_name).
//
//   auto joins = strategies::partition_variables(program, {.min_shard_bytes = 256 << 10, .max_shards = 2});
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "strategies/strategy.h"

namespace mirra::strategies {

struct PartitionPlan {
  // The least bytes of a part: a variable of B bytes is cut into min(max_shards, B / min_shard_bytes,
  // its rows) parts; 0 cuts none.
  int64_t min_shard_bytes = 0;
  int max_shards = 1;
};

// The rows of each part of a variable of `rows` rows and `bytes` bytes: as even as can be, the first
// parts a row longer; one part (all rows) for a variable not cut.
std::vector<int64_t> partition_rows(int64_t rows, int64_t bytes, const PartitionPlan& plan);

// Cuts `program`'s trained variables as `plan` says (before replication: `program` trains one
// replica) and returns the names of the joins, each the Concat of one variable's parts that its
// readers read. Errors: a cut variable whose gradient is read besides by its update (clipping by
// the global norm, loss scaling: they need the whole gradient), or whose update's slots are no
// Variables of its shape.
graph::Expected<std::vector<std::string>> partition_variables(TrainingProgram& program, const PartitionPlan& plan);

}  // namespace mirra::strategies
