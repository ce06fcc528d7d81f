// Bucket hooks: what each gradient of a bucket becomes on its way into the bucket's collective and
// on its way out, as PyTorch DDP's communication hooks are. Mirrored's aggregate_gradients calls the
// plan's hook (ReplicationPlan::bucket_hook) on every gradient of every bucket; without one the
// gradients cross as they are. bf16 compression is one: f32 gradients cross as bf16, summed in f32
// inside the collective and rounded once, and are widened back on their replica.
#pragma once

#include <memory>
#include <string_view>

#include "graph/node.h"

namespace mirra::strategies {

class ReplicaGraph;

class BucketHook {
 public:
  virtual ~BucketHook() = default;
  virtual std::string_view name() const = 0;
  // What replica `replica` hands the collective for its `gradient`, built on its device.
  virtual graph::ValueRef before(ReplicaGraph& r, graph::ValueRef gradient, int replica) const = 0;
  // What the replica reads of the collective's `sum`, given what before() made of its `gradient`.
  virtual graph::ValueRef after(ReplicaGraph& r, graph::ValueRef sum, graph::ValueRef gradient, int replica) const = 0;
};

// f32 gradients cross as bf16 (half the bytes); other dtypes as they are.
std::shared_ptr<const BucketHook> bf16_compression();

}  // namespace mirra::strategies
