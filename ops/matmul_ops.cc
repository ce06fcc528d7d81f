// MatMul and BiasAdd: schemas, builders and CPU kernels.
#include <cstring>
#include <mutex>

#include "ops/cpu/blas.h"
#include "ops/cpu/dnnl_descriptors.h"
#include "ops/cpu/dnnl_engine.h"
#include "ops/cpu/dtype_dispatch.h"
#include "ops/cpu/parallel.h"
#include "ops/cpu/widened_16_bit.h"
#include "ops/kernel_shapes.h"
#include "ops/matmul_ops.h"
#include "ops/op_families.h"
#include "ops/reduce_ops.h"
#include "ops/shape_inference.h"

namespace mirra::ops {

using graph::AttrType;
using graph::DType;
using runtime::KernelContext;
using runtime::Tensor;
using runtime::TensorShape;

namespace {

// bf16 operands: oneDNN's matmul (AMX or AVX-512 BF16 where the CPU has them), summing in f32 and
// writing `c`'s dtype (f32 or bf16). On a device with several threads, a large product runs in chunks
// of C over oneTBB, as the float gemm does, each a single-threaded call on strided views of the
// operands: with an OpenMP team inside each call instead, the teams of concurrent products (a layer's
// two gradients) fought over the cores, and one device trained the CNN 20% and the MLP 35% slower.
// On a device of one thread the product is one call: chunks of a Mirrored replica's halved batch
// are too thin for AMX (15% slower).
Status bf16_matmul(KernelContext& ctx, const Tensor& a, const Tensor& b, bool ta, bool tb, int64_t m, int64_t n,
                   int64_t k, Tensor& c) {
  using dnnl::memory;
  const memory::data_type out = c.dtype() == DType::f32 ? memory::data_type::f32 : memory::data_type::bf16;
  const size_t out_size = graph::dtype_size(c.dtype());
  const int64_t lda = ta ? m : k, ldb = tb ? k : n;
  const auto* a_data = static_cast<const graph::bfloat16*>(a.raw_data());
  const auto* b_data = static_cast<const graph::bfloat16*>(b.raw_data());
  auto* c_data = static_cast<char*>(c.mutable_raw_data());
  const dnnl::engine& engine = cpu::dnnl_engine();
  std::mutex failure_mutex;
  Status failure;
  const auto product = [&](int64_t first, int64_t count, bool rows) {
    // op(A) rows [first, first + count) and all of op(B), or all of op(A) and op(B) columns.
    const int64_t chunk_m = rows ? count : m, chunk_n = rows ? n : count;
    const memory::desc a_md({chunk_m, k}, memory::data_type::bf16, ta ? memory::dims{1, lda} : memory::dims{lda, 1});
    const memory::desc b_md({k, chunk_n}, memory::data_type::bf16, tb ? memory::dims{1, ldb} : memory::dims{ldb, 1});
    const memory::desc c_md({chunk_m, chunk_n}, out, memory::dims{n, 1});
    const graph::bfloat16* a_chunk = a_data + (rows ? (ta ? first : first * lda) : 0);
    const graph::bfloat16* b_chunk = b_data + (rows ? 0 : (tb ? first * ldb : first));
    char* c_chunk = c_data + static_cast<size_t>(rows ? first * n : first) * out_size;
    const std::string key =
        cpu::dnnl_key("matmul/bf16", {ta, tb, chunk_m, chunk_n, k, lda, ldb, n, static_cast<int64_t>(out)});
    Status status = [&]() -> Status {
      MIRRA_ASSIGN_OR_RETURN(const std::shared_ptr<const cpu::DnnlPrimitive> primitive,
                             cpu::cached_dnnl_primitive(ctx.state<cpu::DnnlKernelState>().primitives, key, [&] {
        const auto pd = cpu::matmul_pd(a_md, b_md, c_md, cpu::dnnl_user_scratchpad());
        return cpu::DnnlPrimitive{dnnl::matmul(pd), pd.scratchpad_desc(), {}};
      }, ctx.device(), /*threads=*/1));
      return cpu::dnnl_execute(*primitive,
                               {{DNNL_ARG_SRC, memory(a_md, engine, const_cast<graph::bfloat16*>(a_chunk))},
                                {DNNL_ARG_WEIGHTS, memory(b_md, engine, const_cast<graph::bfloat16*>(b_chunk))},
                                {DNNL_ARG_DST, memory(c_md, engine, c_chunk)}},
                               ctx.device(), /*threads=*/1);
    }();
    if (!status.ok()) {
      std::lock_guard lock(failure_mutex);
      if (failure.ok()) failure = std::move(status);
    }
  };
  if (ctx.device().intra_op_threads() > 1) {
    cpu::for_each_product_chunk(m, n, k, product);
  } else {
    product(0, m, /*rows=*/true);  // a device of one thread (a Mirrored replica here): one call
  }
  return failure;
}

Status matmul_kernel(KernelContext& ctx) {
  const Tensor a = cpu::widened(ctx.input(0), ctx.device());
  const Tensor b = cpu::widened(ctx.input(1), ctx.device());
  const bool ta = ctx.attr<bool>("transpose_a");
  const bool tb = ctx.attr<bool>("transpose_b");
  const int64_t m = ta ? a.dim(1) : a.dim(0);
  const int64_t k = ta ? a.dim(0) : a.dim(1);
  const int64_t kb = tb ? b.dim(1) : b.dim(0);
  const int64_t n = tb ? b.dim(0) : b.dim(1);
  if (k != kb) {
    return graph::invalid_argument("inner dimensions differ: " + a.type_string() + " x " + b.type_string());
  }
  const DType out = ctx.attr<bool>("f32_output") ? DType::f32 : ctx.input(0).dtype();
  Tensor& output = ctx.allocate_output(0, out, TensorShape{m, n});
  return cpu::compute_widened(output, ctx.device(), [&](Tensor& c) -> Status {
    if (a.dtype() != DType::bf16) {
      return cpu::visit_dtype<float, double>(a.dtype(), [&]<class T>(cpu::Type<T>) {
        cpu::gemm<T>(ta, tb, m, n, k, a.data<T>(), b.data<T>(), c.mutable_data<T>(), ctx.device().allocator());
        return Status();
      });
    }
    if (c.num_elements() == 0) return Status();
    if (k == 0) {  // an empty sum (oneDNN wants no zero dims)
      std::memset(c.mutable_raw_data(), 0, c.byte_size());
      return Status();
    }
    return bf16_matmul(ctx, a, b, ta, tb, m, n, k, c);
  });
}

int channel_axis(const std::string& data_format, int rank) { return data_format == "NCHW" ? 1 : rank - 1; }

Status bias_add_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& bias = ctx.input(1);
  MIRRA_ASSIGN_OR_RETURN(const BiasGeometry g, bias_geometry(ctx, x, bias));
  const int64_t channels = g.channels, inner = g.inner;
  Tensor& y = ctx.allocate_output(0, x.dtype(), x.shape());
  return cpu::visit_dtype<float, double>(x.dtype(), [&]<class T>(cpu::Type<T>) {
    const T* in = x.data<T>();
    const T* pb = bias.data<T>();
    T* out = y.mutable_data<T>();
    const int64_t row = channels * inner;  // one outer index
    const int64_t outer = row == 0 ? 0 : x.num_elements() / row;
    cpu::parallel_for(outer, std::max<int64_t>(1, cpu::kElementwiseGrain / std::max<int64_t>(row, 1)),
                      [&](int64_t begin, int64_t end) {
                        for (int64_t o = begin; o < end; ++o) {
                          if (inner == 1) {  // channels last (NHWC, a dense layer): one vector sweep a row
                            const T* in_row = in + o * row;
                            T* out_row = out + o * row;
                            for (int64_t c = 0; c < channels; ++c) out_row[c] = in_row[c] + pb[c];
                            continue;
                          }
                          for (int64_t c = 0; c < channels; ++c) {
                            const int64_t base = o * row + c * inner;
                            for (int64_t i = 0; i < inner; ++i) out[base + i] = in[base + i] + pb[c];
                          }
                        }
                      });
    return Status();
  });
}

using graph::GradientContext;
using Grads = std::vector<ValueRef>;

// For y = op(a) * op(b): da and db by the four transpose cases.
Grads matmul_grad(GradientContext& g) {
  auto& b = g.builder;
  const ValueRef x = g.input(0), w = g.input(1), dy = g.grad(0);
  const bool ta = g.attr<bool>("transpose_a"), tb = g.attr<bool>("transpose_b");
  if (g.attr<bool>("f32_output")) {
    b.fail(graph::unimplemented("MatMul with f32_output has no gradient: mixed precision rewrites the graph after "
                                "differentiation"));
    return Grads(2);
  }
  Grads grads(2);
  if (g.needs(0)) {
    grads[0] = ta ? (tb ? matmul(b, w, dy, true, true) : matmul(b, w, dy, false, true))
                  : (tb ? matmul(b, dy, w, false, false) : matmul(b, dy, w, false, true));
  }
  if (g.needs(1)) {
    grads[1] = tb ? (ta ? matmul(b, dy, x, true, true) : matmul(b, dy, x, true, false))
                  : (ta ? matmul(b, x, dy, false, false) : matmul(b, x, dy, true, false));
  }
  return grads;
}

// The bias gradient sums dy over every dim but the channel dim.
Grads bias_add_grad(GradientContext& g) {
  const int rank = g.input_types[0].shape.rank();
  const int channel = channel_axis(g.attr<std::string>("data_format"), rank);
  std::vector<int64_t> axes;
  for (int d = 0; d < rank; ++d) {
    if (d != channel) axes.push_back(d);
  }
  return {g.grad(0), reduce_sum(g.builder, g.grad(0), axes)};
}

}  // namespace

void register_matmul_ops(graph::OpRegistry& schemas, runtime::KernelRegistry& kernels) {
  schemas.add(graph::OpSchema{
      .name = "MatMul",
      .inputs = {"a", "b"},
      .attrs = {{"transpose_a", AttrType::boolean, false},
                {"transpose_b", AttrType::boolean, false},
                {"f32_output", AttrType::boolean, false}},
      .product_operands = 2,
      .infer = [](const InferContext& ctx) -> Expected<std::vector<TensorType>> {
        MIRRA_ASSIGN_OR_RETURN(const DType output, product_output_dtype(ctx, 2));
        MIRRA_RETURN_IF_ERROR(require_rank(ctx, 0, 2));
        MIRRA_RETURN_IF_ERROR(require_rank(ctx, 1, 2));
        const Shape& a = ctx.input(0).shape;
        const Shape& b = ctx.input(1).shape;
        const bool ta = ctx.attr<bool>("transpose_a");
        const bool tb = ctx.attr<bool>("transpose_b");
        const int64_t k = a.dim(ta ? 0 : 1);
        const int64_t kb = b.dim(tb ? 1 : 0);
        if (k >= 0 && kb >= 0 && k != kb) return ctx.error("inner dimensions differ");
        return std::vector<TensorType>{{output, Shape{a.dim(ta ? 1 : 0), b.dim(tb ? 0 : 1)}}};
      },
      // Each output sums the shared dim: a's columns (its rows when transposed).
      .cost = [](const graph::CostContext& c) {
        const double shared = static_cast<double>(std::max<int64_t>(c.inputs[0].shape.dim(
            c.node.attrs.get<bool>("transpose_a") != nullptr && *c.node.attrs.get<bool>("transpose_a") ? 0 : 1), 0));
        return graph::product_cost(c, graph::CostContext::elements(c.outputs[0]) * shared);
      },
      .summary = "Matrix product op(a) * op(b) of rank-2 tensors (16-bit operands sum in f32; f32_output keeps that sum).",
      .gradient = matmul_grad});
  kernels.add("MatMul", graph::DeviceKind::cpu, {.fn = matmul_kernel, .expensive = true, .prepare = cpu::prepare_dnnl_kernel});

  schemas.add(graph::OpSchema{
      .name = "BiasAdd",
      .inputs = {"value", "bias"},
      .attrs = {{"data_format", AttrType::string, std::string("NHWC")}},
      .infer = [](const InferContext& ctx) -> Expected<std::vector<TensorType>> {
        MIRRA_RETURN_IF_ERROR(require_dtype_in(ctx, 0, {DType::f32, DType::f64}));
        MIRRA_RETURN_IF_ERROR(require_same_dtype(ctx));
        MIRRA_RETURN_IF_ERROR(require_rank(ctx, 1, 1));
        const std::string& format = ctx.attr<std::string>("data_format");
        if (format != "NHWC" && format != "NCHW") return ctx.error("data_format must be NHWC or NCHW");
        const Shape& x = ctx.input(0).shape;
        if (x.rank() < (format == "NCHW" ? 3 : 1)) return ctx.error("value has too low a rank for " + format);
        const int64_t channels = x.dim(channel_axis(format, x.rank()));
        const int64_t bias = ctx.input(1).shape.dim(0);
        if (channels >= 0 && bias >= 0 && channels != bias) return ctx.error("bias size differs from the channel dim");
        return std::vector<TensorType>{ctx.input(0)};
      },
      .summary = "Adds a per-channel bias.",
      .gradient = bias_add_grad});
  kernels.add("BiasAdd", graph::DeviceKind::cpu, {bias_add_kernel});
}

ValueRef matmul(Builder& b, ValueRef x, ValueRef y, bool transpose_x, bool transpose_y) {
  return b.add_value({.op = "MatMul", .inputs = {x, y}, .attrs = {{"transpose_a", transpose_x}, {"transpose_b", transpose_y}}});
}

ValueRef bias_add(Builder& b, ValueRef x, ValueRef bias, const std::string& data_format) {
  return b.add_value({.op = "BiasAdd", .inputs = {x, bias}, .attrs = {{"data_format", data_format}}});
}

}  // namespace mirra::ops
