// FusedBatchNormV3 and FusedBatchNormGradV3, and the fused forms the passes make (FusedBatchNormEx,
// SyncFusedBatchNorm, FusedBatchNormGradEx): schemas, builders, the gradient rule and CPU kernels.
// A channel's statistics are taken in one sweep, as sums of the deviations from the mean of a small
// sample of its values and of their squares, so a large mean costs no precision, and in double, over
// blocks of the input fixed by its shape, added in block order: the same bits on any thread count.
#include "ops/batch_norm_ops.h"

#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include "ops/batch_norm_layout.h"
#include "ops/cpu/dtype_dispatch.h"
#include "ops/cpu/parallel.h"
#include "ops/elementwise_math.h"
#include "ops/op_families.h"
#include "ops/shape_inference.h"

namespace mirra::ops {

using graph::AttrType;
using graph::DType;
using graph::ValueRef;
using runtime::KernelContext;
using runtime::Tensor;
using runtime::TensorShape;

namespace {

using Layout = BatchNormLayout;

// The data formats of a rank-`rank` input.
bool format_fits(const std::string& format, int rank) {
  if (rank == 4) return format == "NHWC" || format == "NCHW";
  if (rank == 5) return format == "NDHWC" || format == "NCDHW";
  return false;
}

int channel_dim(const std::string& format, int rank) { return channels_first(format) ? 1 : rank - 1; }

// ---- Per-channel sums over fixed blocks ----

// Values per block of outer indices (at least one outer index); the blocks depend only on the shape.
constexpr int64_t kBlockValues = 1 << 15;

// body(index, c) for each value of outer rows [o0, o1) and channels [c0, c1), in memory order; channels
// last, the loop over the channels is innermost, so the compiler vectorises the body across them.
template <class Body>
void for_rows(const Layout& l, int64_t o0, int64_t o1, int64_t c0, int64_t c1, const Body& body) {
  if (l.inner == 1) {
    for (int64_t o = o0; o < o1; ++o) {
      const int64_t base = o * l.channels;
      for (int64_t c = c0; c < c1; ++c) body(base + c, c);
    }
    return;
  }
  for (int64_t o = o0; o < o1; ++o) {
    for (int64_t c = c0; c < c1; ++c) {
      const int64_t base = (o * l.channels + c) * l.inner;
      for (int64_t i = 0; i < l.inner; ++i) body(base + i, c);
    }
  }
}

// sums[k][c] = the sum over channel c's values of term(index, c)[k], for K terms; index is the flat
// index of a value. Blocks of outer indices, and within a block each channel (channels last: all
// channels at once), are tasks; their partial sums are added in block order.
template <int K, class Term>
std::array<std::vector<double>, K> channel_sums(const Layout& l, const Term& term) {
  const int64_t row = std::max<int64_t>(l.channels * l.inner, 1);
  const int64_t outer_per_block = std::max<int64_t>(1, kBlockValues / row);
  const int64_t blocks = (l.outer + outer_per_block - 1) / outer_per_block;
  // One task per (block, channel group): channels last sums every channel of a row in one sweep.
  const int64_t group = l.inner == 1 ? l.channels : 1;
  const int64_t groups = group == 0 ? 0 : l.channels / group;
  std::vector<double> partial(static_cast<size_t>(blocks * K * l.channels), 0.0);
  cpu::parallel_for(blocks * groups, 1, [&](int64_t begin, int64_t end) {
    for (int64_t task = begin; task < end; ++task) {
      const int64_t block = task / groups, c0 = task % groups * group;
      double* acc = partial.data() + block * K * l.channels;
      for_rows(l, block * outer_per_block, std::min(l.outer, (block + 1) * outer_per_block), c0, c0 + group,
               [&](int64_t index, int64_t c) {
                 const std::array<double, K> t = term(index, c);
                 for (int k = 0; k < K; ++k) acc[k * l.channels + c] += t[static_cast<size_t>(k)];
               });
    }
  });
  std::array<std::vector<double>, K> sums;
  for (int k = 0; k < K; ++k) {
    sums[static_cast<size_t>(k)].assign(static_cast<size_t>(l.channels), 0.0);
    for (int64_t block = 0; block < blocks; ++block) {
      for (int64_t c = 0; c < l.channels; ++c) {
        sums[static_cast<size_t>(k)][static_cast<size_t>(c)] += partial[static_cast<size_t>((block * K + k) * l.channels + c)];
      }
    }
  }
  return sums;
}

// f(index, channel) for every value, in parallel over rows.
template <class F>
void for_each_value(const Layout& l, const F& f) {
  const int64_t row = std::max<int64_t>(l.channels * l.inner, 1);
  cpu::parallel_for(l.outer, std::max<int64_t>(1, cpu::kElementwiseGrain / row),
                    [&](int64_t begin, int64_t end) { for_rows(l, begin, end, 0, l.channels, f); });
}

// The statistics' and parameters' type for an input of type T: double for double, else float.
template <class T>
using ParamOf = std::conditional_t<std::is_same_v<T, double>, double, float>;

// A value of x as a double (16-bit floats through float, exactly).
template <class T>
double wide(T value) {
  return static_cast<double>(static_cast<ParamOf<T>>(value));
}

DType param_dtype(DType x) { return x == DType::f64 ? DType::f64 : DType::f32; }

template <class U>
std::vector<double> as_doubles(const Tensor& t) {
  std::vector<double> out(static_cast<size_t>(t.num_elements()));
  for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<double>(t.data<U>()[i]);
  return out;
}

template <class U>
void write(Tensor& t, const std::vector<double>& values) {
  for (size_t i = 0; i < values.size(); ++i) t.mutable_data<U>()[i] = static_cast<U>(values[i]);
}

// ---- FusedBatchNormV3 and SyncFusedBatchNorm ----

// What a fused form does after normalising: add a side input (x's shape and dtype), then apply a
// ReLU, each where asked.
struct Epilogue {
  const Tensor* side_input = nullptr;
  bool relu = false;
};

// The epilogue of a kernel whose op has one (its `activation` attribute, and the optional input
// `side_input_index`).
Epilogue epilogue_of(const KernelContext& ctx, size_t side_input_index) {
  return {.side_input = ctx.num_inputs() > side_input_index ? &ctx.input(side_input_index) : nullptr,
          .relu = ctx.attr<std::string>("activation") == "relu"};
}

// f(std::bool_constant<a>, std::bool_constant<b>) with a and b known at compile time, so the
// element loops test neither per value.
template <class F>
auto with_flags(bool a, bool b, const F& f) {
  using Yes = std::true_type;
  using No = std::false_type;
  if (a) return b ? f(Yes{}, Yes{}) : f(Yes{}, No{});
  return b ? f(No{}, Yes{}) : f(No{}, No{});
}

// FusedBatchNormV3's kernel, and with `synchronised` SyncFusedBatchNorm's: in training the batch's
// mean and biased variance are then its inputs 5 and 6, taken over input 7's count of values per
// channel, instead of this batch's own. With `kEpilogue` (FusedBatchNormEx, SyncFusedBatchNorm) the
// normalised value takes the op's side input and activation before it is stored.
template <bool kSynchronised, bool kEpilogue>
Status fused_batch_norm_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const std::string& format = ctx.attr<std::string>("data_format");
  const double epsilon = ctx.attr<double>("epsilon"), factor = ctx.attr<double>("exponential_avg_factor");
  const bool training = ctx.attr<bool>("is_training");
  const Layout l = batch_norm_layout(x, format);
  const bool given_statistics = !training || factor != 1.0;
  MIRRA_RETURN_IF_ERROR(check_per_channel(ctx.input(1), "scale", l.channels, false));
  MIRRA_RETURN_IF_ERROR(check_per_channel(ctx.input(2), "offset", l.channels, false));
  MIRRA_RETURN_IF_ERROR(check_per_channel(ctx.input(3), "mean", l.channels, !given_statistics));
  MIRRA_RETURN_IF_ERROR(check_per_channel(ctx.input(4), "variance", l.channels, !given_statistics));
  if constexpr (kSynchronised) {
    MIRRA_RETURN_IF_ERROR(check_per_channel(ctx.input(5), "batch_mean", l.channels, false));
    MIRRA_RETURN_IF_ERROR(check_per_channel(ctx.input(6), "batch_variance", l.channels, false));
  }
  Epilogue epilogue;
  if constexpr (kEpilogue) epilogue = epilogue_of(ctx, kSynchronised ? 8 : 5);
  if (epilogue.side_input != nullptr && !(epilogue.side_input->shape() == x.shape())) {
    return graph::invalid_argument("side_input " + epilogue.side_input->shape().to_string() + " and x " +
                                   x.shape().to_string() + " differ");
  }
  const DType u = param_dtype(x.dtype());
  Tensor& y = ctx.allocate_output(0, x.dtype(), x.shape());
  std::vector<Tensor*> statistics;
  for (size_t i = 1; i <= 4; ++i) statistics.push_back(&ctx.allocate_output(i, u, {l.channels}));
  ctx.allocate_output(5, u, {0});
  return cpu::visit_dtype<float, double, graph::bfloat16, graph::float16>(x.dtype(), [&]<class T>(cpu::Type<T>) {
    using U = ParamOf<T>;
    const T* px = x.data<T>();
    const std::vector<double> scale = as_doubles<U>(ctx.input(1)), offset = as_doubles<U>(ctx.input(2));
    std::vector<double> mean, variance;  // what normalises
    std::vector<double> moving_mean, moving_variance;
    if (training) {
      double n = static_cast<double>(l.count());
      if constexpr (kSynchronised) {
        mean = as_doubles<U>(ctx.input(5));
        variance = as_doubles<U>(ctx.input(6));
        n = as_doubles<U>(ctx.input(7))[0];
      } else {
        // One sweep: the sums of d and d^2 for d = x - s, s the mean of a few of the channel's values
        // (kShiftSample outer by kShiftSample inner indices, from the first), so that d is of the
        // order of the spread however large the mean, and the variance (sum d^2 - (sum d)^2 / n) / n
        // cancels little in double.
        constexpr int64_t kShiftSample = 16;
        std::vector<double> shift(static_cast<size_t>(l.channels), 0.0);
        const int64_t sample_outer = std::min(l.outer, kShiftSample), sample_inner = std::min(l.inner, kShiftSample);
        for (int64_t c = 0; c < l.channels && n > 0; ++c) {
          double sum = 0;
          for (int64_t o = 0; o < sample_outer; ++o) {
            for (int64_t i = 0; i < sample_inner; ++i) sum += wide(px[(o * l.channels + c) * l.inner + i]);
          }
          shift[static_cast<size_t>(c)] = sum / static_cast<double>(sample_outer * sample_inner);
        }
        const double* ps = shift.data();
        const auto sums = channel_sums<2>(l, [&](int64_t i, int64_t c) {
          const double d = wide(px[i]) - ps[c];
          return std::array<double, 2>{d, d * d};
        });
        mean.resize(shift.size());
        variance.resize(shift.size());
        for (size_t c = 0; c < shift.size(); ++c) {
          const double mean_d = n > 0 ? sums[0][c] / n : 0.0;
          mean[c] = shift[c] + mean_d;
          variance[c] = n > 0 ? std::max(sums[1][c] / n - mean_d * mean_d, 0.0) : 0.0;
        }
      }
      const double correction = n / std::max(n - 1.0, 1.0);  // n / (n - 1): the unbiased variance
      const std::vector<double> old_mean = as_doubles<U>(ctx.input(3)), old_variance = as_doubles<U>(ctx.input(4));
      for (int64_t c = 0; c < l.channels; ++c) {
        const size_t k = static_cast<size_t>(c);
        const double nan = std::numeric_limits<double>::quiet_NaN();
        const double batch_mean = n == 0 ? nan : mean[k];
        const double batch_variance = n == 0 ? nan : variance[k] * correction;
        moving_mean.push_back(factor == 1.0 ? batch_mean : (1.0 - factor) * old_mean[k] + factor * batch_mean);
        moving_variance.push_back(factor == 1.0 ? batch_variance : (1.0 - factor) * old_variance[k] + factor * batch_variance);
      }
    } else {
      mean = moving_mean = as_doubles<U>(ctx.input(3));
      variance = moving_variance = as_doubles<U>(ctx.input(4));
    }
    write<U>(*statistics[0], moving_mean);
    write<U>(*statistics[1], moving_variance);
    write<U>(*statistics[2], mean);
    write<U>(*statistics[3], variance);
    // y = (x - centre) * a + shift in U per channel, with a = scale / sqrt(variance + epsilon), centre
    // the mean rounded to U and shift = offset - (mean - centre) * a: x - centre is exact for x near
    // the mean, and shift makes up for centre's rounding, so a large mean costs no precision.
    std::vector<U> centre(static_cast<size_t>(l.channels)), a(centre.size()), shift(centre.size());
    for (size_t c = 0; c < centre.size(); ++c) {
      const double ac = scale[c] / std::sqrt(variance[c] + epsilon);
      centre[c] = static_cast<U>(mean[c]);
      a[c] = static_cast<U>(ac);
      shift[c] = static_cast<U>(offset[c] - (mean[c] - static_cast<double>(centre[c])) * ac);
    }
    T* py = y.mutable_data<T>();
    const T* side = epilogue.side_input != nullptr ? epilogue.side_input->data<T>() : nullptr;
    const U *pc = centre.data(), *pa = a.data(), *ps = shift.data();
    with_flags(side != nullptr, epilogue.relu, [&](auto with_side, auto with_relu) {
      for_each_value(l, [&](int64_t i, int64_t c) {
        U v = (static_cast<U>(px[i]) - pc[c]) * pa[c] + ps[c];
        if constexpr (decltype(with_side)::value) v += static_cast<U>(side[i]);
        if constexpr (decltype(with_relu)::value) v = math::Relu::apply(v);
        py[i] = static_cast<T>(v);
      });
    });
    return Status();
  });
}

// ---- FusedBatchNormGradV3 ----

// `value` where `keep`, else +0, without a branch: a ReLU's mask is as good as random, and a branch on
// it would be mispredicted half the time.
template <class T>
T kept_where(T value, bool keep) {
  using Bits = std::conditional_t<sizeof(T) == 8, uint64_t, std::conditional_t<sizeof(T) == 4, uint32_t, uint16_t>>;
  const Bits mask = static_cast<Bits>(Bits{0} - static_cast<Bits>(keep));
  return std::bit_cast<T>(static_cast<Bits>(std::bit_cast<Bits>(value) & mask));
}

// FusedBatchNormGradV3's kernel, and with `kThroughActivation` FusedBatchNormGradEx's: dy is then the
// gradient of the activation's output y (input 6), which reaches the normalisation where y > 0 (ReLU),
// and output 5 holds that masked dy when `side_input_backprop` (the side input's gradient).
template <bool kThroughActivation>
Status fused_batch_norm_grad_kernel(KernelContext& ctx) {
  const Tensor& dy = ctx.input(0);
  const Tensor& x = ctx.input(1);
  const std::string& format = ctx.attr<std::string>("data_format");
  const double epsilon = ctx.attr<double>("epsilon");
  const bool training = ctx.attr<bool>("is_training");
  if (!(dy.shape() == x.shape())) {
    return graph::invalid_argument("y_backprop " + dy.shape().to_string() + " and x " + x.shape().to_string() + " differ");
  }
  bool relu = false, side_input_backprop = false;
  if constexpr (kThroughActivation) {
    relu = ctx.attr<std::string>("activation") == "relu";
    side_input_backprop = ctx.attr<bool>("side_input_backprop");
    if (!(ctx.input(6).shape() == x.shape())) {
      return graph::invalid_argument("y " + ctx.input(6).shape().to_string() + " and x " + x.shape().to_string() + " differ");
    }
  }
  const Layout l = batch_norm_layout(x, format);
  MIRRA_RETURN_IF_ERROR(check_per_channel(ctx.input(2), "scale", l.channels, false));
  MIRRA_RETURN_IF_ERROR(check_per_channel(ctx.input(3), "reserve_space_1", l.channels, false));
  MIRRA_RETURN_IF_ERROR(check_per_channel(ctx.input(4), "reserve_space_2", l.channels, false));
  const DType u = param_dtype(x.dtype());
  Tensor& dx = ctx.allocate_output(0, x.dtype(), x.shape());
  Tensor& dscale = ctx.allocate_output(1, u, {l.channels});
  Tensor& doffset = ctx.allocate_output(2, u, {l.channels});
  // Outputs 3 and 4 hold nothing; TensorFlow returns them as zero scalars.
  for (size_t i = 3; i <= 4; ++i) std::memset(ctx.allocate_output(i, u, {}).mutable_raw_data(), 0, graph::dtype_size(u));
  Tensor* masked = nullptr;  // dy through the activation, where asked for
  if constexpr (kThroughActivation) {
    masked = &ctx.allocate_output(5, x.dtype(), side_input_backprop ? x.shape() : TensorShape{0});
  }
  return cpu::visit_dtype<float, double, graph::bfloat16, graph::float16>(x.dtype(), [&]<class T>(cpu::Type<T>) {
    using U = ParamOf<T>;
    const T* px = x.data<T>();
    const T* pdy = dy.data<T>();
    const T* pactivated = kThroughActivation ? ctx.input(6).data<T>() : nullptr;
    T* pmasked = side_input_backprop ? masked->mutable_data<T>() : nullptr;
    return with_flags(relu, pmasked != nullptr, [&](auto with_relu, auto write_masked) {
    constexpr bool kRelu = decltype(with_relu)::value, kWriteMasked = decltype(write_masked)::value;
    // The gradient that reaches the normalisation at value i.
    const auto reaching = [&](int64_t i) -> T {
      if constexpr (kRelu) return kept_where(pdy[i], static_cast<U>(pactivated[i]) > U(0));
      return pdy[i];
    };
    const std::vector<double> scale = as_doubles<U>(ctx.input(2)), mean = as_doubles<U>(ctx.input(3));
    std::vector<double> inv = as_doubles<U>(ctx.input(4));  // 1 / sqrt(variance + epsilon)
    for (double& v : inv) v = 1.0 / std::sqrt(v + epsilon);
    // sum(dy) and sum(dy * (x - mean)) per channel.
    const double* centre_of = mean.data();
    const auto sums = channel_sums<2>(l, [&](int64_t i, int64_t c) {
      const T reached = reaching(i);
      if constexpr (kWriteMasked) pmasked[i] = reached;  // each value is summed once
      const double g = wide(reached);
      return std::array<double, 2>{g, g * (wide(px[i]) - centre_of[c])};
    });
    const double n = static_cast<double>(std::max<int64_t>(l.count(), 1));
    std::vector<double> dscale_values, doffset_values;
    // dx = a * ((dy - mean(dy)) - (x - mean) * k) per channel, a = scale * inv and k = inv^2 *
    // mean(dy * (x - mean)); in inference dx = a * dy. dy - mean(dy) comes first: the terms of dx
    // nearly cancel, and this way they do so before rounding in U.
    std::vector<U> a(static_cast<size_t>(l.channels)), mean_dy(a.size()), k(a.size()), centre(a.size());
    for (size_t c = 0; c < a.size(); ++c) {
      dscale_values.push_back(sums[1][c] * inv[c]);
      doffset_values.push_back(sums[0][c]);
      a[c] = static_cast<U>(scale[c] * inv[c]);
      mean_dy[c] = static_cast<U>(training ? sums[0][c] / n : 0.0);
      k[c] = static_cast<U>(training ? inv[c] * inv[c] * sums[1][c] / n : 0.0);
      centre[c] = static_cast<U>(mean[c]);
    }
    write<U>(dscale, dscale_values);
    write<U>(doffset, doffset_values);
    T* pdx = dx.mutable_data<T>();
    const U *pa = a.data(), *pm = mean_dy.data(), *pk = k.data(), *pc = centre.data();
    const auto dx_of = [&](int64_t i, int64_t c, T g) {
      pdx[i] = static_cast<T>(pa[c] * ((static_cast<U>(g) - pm[c]) - (static_cast<U>(px[i]) - pc[c]) * pk[c]));
    };
    for_each_value(l, [&](int64_t i, int64_t c) { dx_of(i, c, kWriteMasked ? pmasked[i] : reaching(i)); });
    return Status();
    });
  });
}

// ---- Schemas ----

std::vector<graph::AttrSpec> batch_norm_attrs(bool with_factor) {
  std::vector<graph::AttrSpec> attrs = {{"epsilon", AttrType::real, 1e-4},
                                        {"data_format", AttrType::string, std::string("NHWC")},
                                        {"is_training", AttrType::boolean, true}};
  if (with_factor) attrs.push_back({"exponential_avg_factor", AttrType::real, 1.0});
  return attrs;
}

// x (input `x_input`) and its data format; returns the channel count (-1: unknown).
Expected<int64_t> check_input(const InferContext& ctx, size_t x_input) {
  MIRRA_RETURN_IF_ERROR(require_dtype_in(ctx, x_input, {DType::f32, DType::f64, DType::bf16, DType::f16}));
  const std::string& format = ctx.attr<std::string>("data_format");
  const graph::Shape& shape = ctx.input(x_input).shape;
  if (!format_fits(format, shape.rank())) {
    return ctx.error("x must be 4-D with data_format NHWC or NCHW, or 5-D with NDHWC or NCDHW; got rank " +
                     std::to_string(shape.rank()) + " and " + format);
  }
  if (ctx.attr<double>("epsilon") < 0) return ctx.error("epsilon must not be negative");
  return shape.dim(channel_dim(format, shape.rank()));
}

// Input i, `name`, is a rank-1 tensor of the statistics' dtype `u` with `channels` elements (or
// none, where `may_be_empty`).
Status check_parameter_type(const InferContext& ctx, size_t i, const char* name, DType u, int64_t channels,
                            bool may_be_empty) {
  const graph::TensorType& t = ctx.input(i);
  if (t.dtype != u) return ctx.error(std::string(name) + " must be " + std::string(graph::dtype_name(u)) + " for this x");
  if (t.shape.rank() != 1) return ctx.error(std::string(name) + " must be a vector, one value per channel");
  const int64_t size = t.shape.dim(0);
  if (size < 0 || channels < 0 || size == channels || (may_be_empty && size == 0)) return Status();
  return ctx.error(std::string(name) + " must have the same number of elements as the channels of x, got " +
                   std::to_string(size) + " and " + std::to_string(channels));
}

// An epilogue's activation: relu or none.
Status check_activation(const InferContext& ctx) {
  const std::string& activation = ctx.attr<std::string>("activation");
  if (activation != "relu" && activation != "none") return ctx.error("activation must be relu or none, got " + activation);
  return Status();
}

// The forward ops' shape rule: FusedBatchNormV3 (5 inputs), FusedBatchNormEx (a side input may follow
// as input 5) and SyncFusedBatchNorm (the batch's statistics and their count as inputs 5 to 7, a side
// input as input 8).
Expected<std::vector<TensorType>> infer_fused_batch_norm(const InferContext& ctx, bool synchronised, bool epilogue) {
  MIRRA_ASSIGN_OR_RETURN(const int64_t channels, check_input(ctx, 0));
  const double factor = ctx.attr<double>("exponential_avg_factor");
  const bool given_statistics = !ctx.attr<bool>("is_training") || factor != 1.0;
  if (factor < 0 || factor > 1) return ctx.error("exponential_avg_factor must be in [0, 1]");
  const DType u = param_dtype(ctx.input(0).dtype);
  const char* names[] = {"x", "scale", "offset", "mean", "variance"};
  for (size_t i = 1; i <= 4; ++i) {
    MIRRA_RETURN_IF_ERROR(check_parameter_type(ctx, i, names[i], u, channels, i >= 3 && !given_statistics));
  }
  if (synchronised) {
    MIRRA_RETURN_IF_ERROR(check_parameter_type(ctx, 5, "batch_mean", u, channels, false));
    MIRRA_RETURN_IF_ERROR(check_parameter_type(ctx, 6, "batch_variance", u, channels, false));
    if (ctx.input(7).dtype != u || ctx.input(7).shape.rank() != 0) return ctx.error("count must be a scalar of the statistics' dtype");
  }
  if (epilogue) {
    MIRRA_RETURN_IF_ERROR(check_activation(ctx));
    const size_t side = synchronised ? 8 : 5;
    if (ctx.num_inputs() > side && (ctx.input(side).dtype != ctx.input(0).dtype ||
                                    !ctx.input(side).shape.compatible_with(ctx.input(0).shape))) {
      return ctx.error("side_input must have x's dtype and shape");
    }
  }
  const TensorType statistic{u, graph::Shape{channels}};
  return std::vector<TensorType>{ctx.input(0), statistic, statistic, statistic, statistic, {u, graph::Shape{0}}};
}

// FusedBatchNormGradV3's shape rule, and with `through_activation` FusedBatchNormGradEx's (input 6, the
// activation's output, and output 5, the side input's gradient or nothing).
Expected<std::vector<TensorType>> infer_fused_batch_norm_grad(const InferContext& ctx, bool through_activation) {
  MIRRA_ASSIGN_OR_RETURN(const int64_t channels, check_input(ctx, 1));
  const auto like_x = [&](size_t i) {
    return ctx.input(i).dtype == ctx.input(1).dtype && ctx.input(i).shape.compatible_with(ctx.input(1).shape);
  };
  if (!like_x(0)) return ctx.error("y_backprop must have x's dtype and shape");
  const DType u = param_dtype(ctx.input(1).dtype);
  const char* names[] = {"y_backprop", "x", "scale", "reserve_space_1", "reserve_space_2"};
  for (size_t i = 2; i <= 4; ++i) MIRRA_RETURN_IF_ERROR(check_parameter_type(ctx, i, names[i], u, channels, false));
  const TensorType per_channel{u, graph::Shape{channels}}, unused{u, graph::Shape{}};
  std::vector<TensorType> outputs{ctx.input(1), per_channel, per_channel, unused, unused};
  if (through_activation) {
    MIRRA_RETURN_IF_ERROR(check_activation(ctx));
    if (!like_x(6)) return ctx.error("y must have x's dtype and shape");
    outputs.push_back(ctx.attr<bool>("side_input_backprop") ? ctx.input(1) : TensorType{ctx.input(1).dtype, graph::Shape{0}});
  }
  return outputs;
}

// TensorFlow's rule: y's gradient reaches x, scale and offset; the statistics outputs are not
// differentiated, nor the given mean and variance (moving statistics, which nothing trains).
std::vector<ValueRef> fused_batch_norm_gradient(graph::GradientContext& g) {
  const BatchNormOptions options{.epsilon = g.attr<double>("epsilon"),
                                 .data_format = g.attr<std::string>("data_format"),
                                 .is_training = g.attr<bool>("is_training")};
  if (!g.grad(0).valid()) return {};
  // In inference the given statistics normalised, and the gradient reads them.
  const ValueRef mean = options.is_training ? g.output(3) : g.input(3);
  const ValueRef variance = options.is_training ? g.output(4) : g.input(4);
  const BatchNormGrad grad = fused_batch_norm_grad(g.builder, g.grad(0), g.input(0), g.input(1), mean, variance, g.output(5), options);
  return {grad.x, grad.scale, grad.offset, {}, {}};
}

}  // namespace

void register_batch_norm_ops(graph::OpRegistry& schemas, runtime::KernelRegistry& kernels) {
  const auto forward_rule = [](bool synchronised, bool epilogue) {
    return [=](const InferContext& ctx) { return infer_fused_batch_norm(ctx, synchronised, epilogue); };
  };
  const auto with_activation = [](std::vector<graph::AttrSpec> attrs, const char* activation) {
    attrs.push_back({"activation", AttrType::string, std::string(activation)});
    return attrs;
  };
  const char* fused_after_differentiation = "the fusion passes make it after differentiation, from ops that have gradients";
  schemas.add(graph::OpSchema{
      .name = "FusedBatchNormV3",
      .inputs = {"x", "scale", "offset", "mean", "variance"},
      .attrs = batch_norm_attrs(true),
      .training_attr = "is_training",
      .infer = forward_rule(false, false),
      .summary = "Batch normalisation per channel, with the batch's statistics (training) or the given ones.",
      .gradient = fused_batch_norm_gradient});
  kernels.add("FusedBatchNormV3", graph::DeviceKind::cpu, {.fn = fused_batch_norm_kernel<false, false>, .expensive = true});
  schemas.add(graph::OpSchema{
      .name = "FusedBatchNormEx",
      .inputs = {"x", "scale", "offset", "mean", "variance", "side_input"},
      .optional_inputs = 1,
      .attrs = with_activation(batch_norm_attrs(true), "relu"),
      .training_attr = "is_training",
      .infer = forward_rule(false, true),
      .summary = "FusedBatchNormV3, then + side_input (when given) and the activation (relu or none), in one sweep.",
      .no_gradient = fused_after_differentiation});
  kernels.add("FusedBatchNormEx", graph::DeviceKind::cpu, {.fn = fused_batch_norm_kernel<false, true>, .expensive = true});
  schemas.add(graph::OpSchema{
      .name = "SyncFusedBatchNorm",
      .inputs = {"x", "scale", "offset", "mean", "variance", "batch_mean", "batch_variance", "count", "side_input"},
      .optional_inputs = 1,
      .attrs = with_activation(batch_norm_attrs(true), "none"),
      .training_attr = "is_training",
      .infer = forward_rule(true, true),
      .summary = "FusedBatchNormV3 whose training statistics are given: the mean and biased variance of the batch over "
                 "every replica, taken over `count` values per channel (sync_batch_norm); then FusedBatchNormEx's "
                 "side input and activation.",
      .no_gradient = "the sync_batch_norm rewrite makes it after differentiation, with the gradient's collectives"});
  kernels.add("SyncFusedBatchNorm", graph::DeviceKind::cpu, {.fn = fused_batch_norm_kernel<true, true>, .expensive = true});
  schemas.add(graph::OpSchema{
      .name = "FusedBatchNormGradV3",
      .inputs = {"y_backprop", "x", "scale", "reserve_space_1", "reserve_space_2", "reserve_space_3"},
      .attrs = batch_norm_attrs(false),
      .infer = [](const InferContext& ctx) { return infer_fused_batch_norm_grad(ctx, false); },
      .summary = "The gradient of FusedBatchNormV3's y with respect to x, scale and offset.",
      .no_gradient = "second derivatives of batch normalisation are not supported"});
  kernels.add("FusedBatchNormGradV3", graph::DeviceKind::cpu, {.fn = fused_batch_norm_grad_kernel<false>, .expensive = true});
  std::vector<graph::AttrSpec> grad_ex_attrs = with_activation(batch_norm_attrs(false), "relu");
  grad_ex_attrs.push_back({"side_input_backprop", AttrType::boolean, false});
  schemas.add(graph::OpSchema{
      .name = "FusedBatchNormGradEx",
      .inputs = {"y_backprop", "x", "scale", "reserve_space_1", "reserve_space_2", "reserve_space_3", "y"},
      .attrs = std::move(grad_ex_attrs),
      .infer = [](const InferContext& ctx) { return infer_fused_batch_norm_grad(ctx, true); },
      .summary = "The gradient of FusedBatchNormEx: y_backprop is the gradient of its output y, which passes the "
                 "activation where y > 0 (relu); output 5 is that gradient (the side input's) when "
                 "side_input_backprop, else empty.",
      .no_gradient = fused_after_differentiation});
  kernels.add("FusedBatchNormGradEx", graph::DeviceKind::cpu, {.fn = fused_batch_norm_grad_kernel<true>, .expensive = true});
}

BatchNorm fused_batch_norm(graph::Builder& b, ValueRef x, ValueRef scale, ValueRef offset, ValueRef mean,
                           ValueRef variance, const BatchNormOptions& options) {
  const graph::NodeId id = b.add({.op = "FusedBatchNormV3",
                                  .inputs = {x, scale, offset, mean, variance},
                                  .attrs = {{"epsilon", options.epsilon},
                                            {"exponential_avg_factor", options.exponential_avg_factor},
                                            {"data_format", options.data_format},
                                            {"is_training", options.is_training}}});
  if (id == graph::kInvalidNode) return {};
  return {{id, 0}, {id, 1}, {id, 2}, {id, 3}, {id, 4}, {id, 5}};
}

BatchNorm sync_fused_batch_norm(graph::Builder& b, ValueRef x, ValueRef scale, ValueRef offset, ValueRef mean,
                                ValueRef variance, ValueRef batch_mean, ValueRef batch_variance, ValueRef count,
                                const BatchNormOptions& options, const BatchNormEpilogue& epilogue) {
  std::vector<ValueRef> inputs = {x, scale, offset, mean, variance, batch_mean, batch_variance, count};
  if (epilogue.side_input.valid()) inputs.push_back(epilogue.side_input);
  const graph::NodeId id = b.add({.op = "SyncFusedBatchNorm",
                                  .inputs = std::move(inputs),
                                  .attrs = {{"epsilon", options.epsilon},
                                            {"exponential_avg_factor", options.exponential_avg_factor},
                                            {"data_format", options.data_format},
                                            {"is_training", options.is_training},
                                            {"activation", epilogue.activation}}});
  if (id == graph::kInvalidNode) return {};
  return {{id, 0}, {id, 1}, {id, 2}, {id, 3}, {id, 4}, {id, 5}};
}

BatchNormGrad fused_batch_norm_grad(graph::Builder& b, ValueRef dy, ValueRef x, ValueRef scale, ValueRef reserve_space_1,
                                    ValueRef reserve_space_2, ValueRef reserve_space_3, const BatchNormOptions& options) {
  const graph::NodeId id = b.add({.op = "FusedBatchNormGradV3",
                                  .inputs = {dy, x, scale, reserve_space_1, reserve_space_2, reserve_space_3},
                                  .attrs = {{"epsilon", options.epsilon},
                                            {"data_format", options.data_format},
                                            {"is_training", options.is_training}}});
  if (id == graph::kInvalidNode) return {};
  return {{id, 0}, {id, 1}, {id, 2}};
}

}  // namespace mirra::ops
