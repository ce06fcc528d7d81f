// bf16_compression: a Cast to bf16 on each replica before the collective, and back to f32 after it.
#include "strategies/bucket_hooks.h"

#include "ops/ops.h"
#include "strategies/replica_graph.h"

namespace mirra::strategies {

namespace {

class Bf16Compression final : public BucketHook {
 public:
  std::string_view name() const override { return "bf16"; }

  graph::ValueRef before(ReplicaGraph& r, graph::ValueRef gradient, int replica) const override {
    if (r.builder.type(gradient).dtype != graph::DType::f32) return gradient;
    return r.on(replica, ops::cast(r.builder, gradient, graph::DType::bf16));
  }

  graph::ValueRef after(ReplicaGraph& r, graph::ValueRef sum, graph::ValueRef gradient, int replica) const override {
    if (r.builder.type(gradient).dtype != graph::DType::f32) return sum;
    return r.on(replica, ops::cast(r.builder, sum, graph::DType::f32));
  }
};

}  // namespace

std::shared_ptr<const BucketHook> bf16_compression() {
  static const std::shared_ptr<const BucketHook> hook = std::make_shared<Bf16Compression>();
  return hook;
}

}  // namespace mirra::strategies
