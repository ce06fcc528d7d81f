// The oneDNN primitive descriptors the kernels build, in one place for oneDNN 2 and 3: 2.x describes
// an operation first (convolution_forward::desc and the like) and 3.x takes the same terms in the
// primitive descriptor's constructor. Debian 12 has oneDNN 2.6; a build may use a newer one instead
// (MIRRA_ONEDNN_ROOT; docs/performance.md, "A newer oneDNN").
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

#include "ops/cpu/window_geometry.h"

namespace mirra::ops::cpu {

// Direct convolution of `g`'s geometry; `bias` may be null.
dnnl::convolution_forward::primitive_desc convolution_forward_pd(dnnl::prop_kind prop, const dnnl::memory::desc& src,
                                                                 const dnnl::memory::desc& weights,
                                                                 const dnnl::memory::desc* bias,
                                                                 const dnnl::memory::desc& dst, const WindowGeometry& g,
                                                                 const dnnl::primitive_attr& attr);

dnnl::convolution_backward_data::primitive_desc convolution_backward_data_pd(
    const dnnl::memory::desc& diff_src, const dnnl::memory::desc& weights, const dnnl::memory::desc& diff_dst,
    const WindowGeometry& g, const dnnl::convolution_forward::primitive_desc& hint, const dnnl::primitive_attr& attr);

dnnl::convolution_backward_weights::primitive_desc convolution_backward_weights_pd(
    const dnnl::memory::desc& src, const dnnl::memory::desc& diff_weights, const dnnl::memory::desc& diff_dst,
    const WindowGeometry& g, const dnnl::convolution_forward::primitive_desc& hint, const dnnl::primitive_attr& attr);

// Inference pooling of `g`'s geometry with a window of `kernel` (no dilation).
dnnl::pooling_forward::primitive_desc pooling_forward_pd(dnnl::algorithm algorithm, const dnnl::memory::desc& src,
                                                         const dnnl::memory::desc& dst, const WindowGeometry& g,
                                                         const dnnl::memory::dims& kernel,
                                                         const dnnl::primitive_attr& attr);

dnnl::matmul::primitive_desc matmul_pd(const dnnl::memory::desc& a, const dnnl::memory::desc& b,
                                       const dnnl::memory::desc& c, const dnnl::primitive_attr& attr);

// An element-wise function of `algorithm` over `data` (training, so that its backward may follow).
dnnl::eltwise_forward::primitive_desc eltwise_forward_pd(dnnl::algorithm algorithm, const dnnl::memory::desc& data,
                                                         const dnnl::primitive_attr& attr);
// Its gradient: diff_src = diff_dst * f'(src), with `data` the desc of all three.
dnnl::eltwise_backward::primitive_desc eltwise_backward_pd(dnnl::algorithm algorithm, const dnnl::memory::desc& data,
                                                           const dnnl::eltwise_forward::primitive_desc& hint,
                                                           const dnnl::primitive_attr& attr);

// A ReLU applied as the primitive writes its result.
dnnl::post_ops relu_post_op();

}  // namespace mirra::ops::cpu
