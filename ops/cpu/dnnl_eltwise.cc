// dnnl_eltwise and dnnl_eltwise_gradient.
#include "ops/cpu/dnnl_eltwise.h"

#include "ops/cpu/dnnl_descriptors.h"
#include "ops/cpu/dnnl_engine.h"

namespace mirra::ops::cpu {

namespace {

using dnnl::memory;

memory::desc flat(int64_t n) { return memory::desc({n}, memory::data_type::f32, memory::format_tag::a); }

memory bound(const memory::desc& desc, const float* data) {
  return memory(desc, dnnl_engine(), const_cast<float*>(data));  // oneDNN takes inputs as void*
}

}  // namespace

graph::Status dnnl_eltwise(runtime::KernelContext& ctx, dnnl::algorithm algorithm, const float* x, float* y, int64_t n) {
  if (n == 0) return graph::Status();
  const memory::desc data = flat(n);
  const std::string key = dnnl_key("eltwise/forward", {static_cast<int64_t>(algorithm), n});
  MIRRA_ASSIGN_OR_RETURN(const std::shared_ptr<const DnnlPrimitive> primitive,
                         cached_dnnl_primitive(ctx.state<DnnlKernelState>().primitives, key, [&] {
                           const auto pd = eltwise_forward_pd(algorithm, data, dnnl_user_scratchpad());
                           return DnnlPrimitive{dnnl::eltwise_forward(pd), pd.scratchpad_desc(), {}};
                         }, ctx.device()));
  return dnnl_execute(*primitive, {{DNNL_ARG_SRC, bound(data, x)}, {DNNL_ARG_DST, bound(data, y)}}, ctx.device());
}

graph::Status dnnl_eltwise_gradient(runtime::KernelContext& ctx, dnnl::algorithm algorithm, const float* dy, const float* x,
                                    float* dx, int64_t n) {
  if (n == 0) return graph::Status();
  const memory::desc data = flat(n);
  const std::string key = dnnl_key("eltwise/backward", {static_cast<int64_t>(algorithm), n});
  MIRRA_ASSIGN_OR_RETURN(const std::shared_ptr<const DnnlPrimitive> primitive,
                         cached_dnnl_primitive(ctx.state<DnnlKernelState>().primitives, key, [&] {
                           const auto hint = eltwise_forward_pd(algorithm, data, dnnl_user_scratchpad());
                           const auto pd = eltwise_backward_pd(algorithm, data, hint, dnnl_user_scratchpad());
                           return DnnlPrimitive{dnnl::eltwise_backward(pd), pd.scratchpad_desc(), {}};
                         }, ctx.device()));
  return dnnl_execute(*primitive,
                      {{DNNL_ARG_DIFF_DST, bound(data, dy)}, {DNNL_ARG_SRC, bound(data, x)}, {DNNL_ARG_DIFF_SRC, bound(data, dx)}},
                      ctx.device());
}

}  // namespace mirra::ops::cpu
