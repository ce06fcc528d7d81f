// oneDNN primitive descriptors through the 2.x or the 3.x API, whichever the build's oneDNN has.
#include "ops/cpu/dnnl_descriptors.h"

#include "ops/cpu/dnnl_engine.h"

namespace mirra::ops::cpu {

using dnnl::memory;

#if DNNL_VERSION_MAJOR >= 3

dnnl::convolution_forward::primitive_desc convolution_forward_pd(dnnl::prop_kind prop, const memory::desc& src,
                                                                 const memory::desc& weights, const memory::desc* bias,
                                                                 const memory::desc& dst, const WindowGeometry& g,
                                                                 const dnnl::primitive_attr& attr) {
  const auto algorithm = dnnl::algorithm::convolution_direct;
  return bias == nullptr ? dnnl::convolution_forward::primitive_desc(dnnl_engine(), prop, algorithm, src, weights, dst,
                                                                     g.strides, g.dilations, g.pad_before, g.pad_after,
                                                                     attr)
                         : dnnl::convolution_forward::primitive_desc(dnnl_engine(), prop, algorithm, src, weights,
                                                                     *bias, dst, g.strides, g.dilations, g.pad_before,
                                                                     g.pad_after, attr);
}

dnnl::convolution_backward_data::primitive_desc convolution_backward_data_pd(
    const memory::desc& diff_src, const memory::desc& weights, const memory::desc& diff_dst, const WindowGeometry& g,
    const dnnl::convolution_forward::primitive_desc& hint, const dnnl::primitive_attr& attr) {
  return dnnl::convolution_backward_data::primitive_desc(dnnl_engine(), dnnl::algorithm::convolution_direct, diff_src,
                                                         weights, diff_dst, g.strides, g.dilations, g.pad_before,
                                                         g.pad_after, hint, attr);
}

dnnl::convolution_backward_weights::primitive_desc convolution_backward_weights_pd(
    const memory::desc& src, const memory::desc& diff_weights, const memory::desc& diff_dst, const WindowGeometry& g,
    const dnnl::convolution_forward::primitive_desc& hint, const dnnl::primitive_attr& attr) {
  return dnnl::convolution_backward_weights::primitive_desc(dnnl_engine(), dnnl::algorithm::convolution_direct, src,
                                                            diff_weights, diff_dst, g.strides, g.dilations,
                                                            g.pad_before, g.pad_after, hint, attr);
}

dnnl::pooling_forward::primitive_desc pooling_forward_pd(dnnl::algorithm algorithm, const memory::desc& src,
                                                         const memory::desc& dst, const WindowGeometry& g,
                                                         const memory::dims& kernel, const dnnl::primitive_attr& attr) {
  return dnnl::pooling_forward::primitive_desc(dnnl_engine(), dnnl::prop_kind::forward_inference, algorithm, src, dst,
                                               g.strides, kernel, memory::dims(kernel.size(), 0), g.pad_before,
                                               g.pad_after, attr);
}

dnnl::matmul::primitive_desc matmul_pd(const memory::desc& a, const memory::desc& b, const memory::desc& c,
                                       const dnnl::primitive_attr& attr) {
  return dnnl::matmul::primitive_desc(dnnl_engine(), a, b, c, attr);
}

dnnl::eltwise_forward::primitive_desc eltwise_forward_pd(dnnl::algorithm algorithm, const memory::desc& data,
                                                         const dnnl::primitive_attr& attr) {
  return dnnl::eltwise_forward::primitive_desc(dnnl_engine(), dnnl::prop_kind::forward_training, algorithm, data, data, 0.0f,
                                               0.0f, attr);
}

dnnl::eltwise_backward::primitive_desc eltwise_backward_pd(dnnl::algorithm algorithm, const memory::desc& data,
                                                           const dnnl::eltwise_forward::primitive_desc& hint,
                                                           const dnnl::primitive_attr& attr) {
  return dnnl::eltwise_backward::primitive_desc(dnnl_engine(), algorithm, data, data, data, 0.0f, 0.0f, hint, attr);
}

dnnl::post_ops relu_post_op() {
  dnnl::post_ops post_ops;
  post_ops.append_eltwise(dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
  return post_ops;
}

#else  // oneDNN 2.x

dnnl::convolution_forward::primitive_desc convolution_forward_pd(dnnl::prop_kind prop, const memory::desc& src,
                                                                 const memory::desc& weights, const memory::desc* bias,
                                                                 const memory::desc& dst, const WindowGeometry& g,
                                                                 const dnnl::primitive_attr& attr) {
  const auto algorithm = dnnl::algorithm::convolution_direct;
  const auto desc = bias == nullptr ? dnnl::convolution_forward::desc(prop, algorithm, src, weights, dst, g.strides,
                                                                      g.dilations, g.pad_before, g.pad_after)
                                    : dnnl::convolution_forward::desc(prop, algorithm, src, weights, *bias, dst,
                                                                      g.strides, g.dilations, g.pad_before, g.pad_after);
  return dnnl::convolution_forward::primitive_desc(desc, attr, dnnl_engine());
}

dnnl::convolution_backward_data::primitive_desc convolution_backward_data_pd(
    const memory::desc& diff_src, const memory::desc& weights, const memory::desc& diff_dst, const WindowGeometry& g,
    const dnnl::convolution_forward::primitive_desc& hint, const dnnl::primitive_attr& attr) {
  return dnnl::convolution_backward_data::primitive_desc(
      dnnl::convolution_backward_data::desc(dnnl::algorithm::convolution_direct, diff_src, weights, diff_dst, g.strides,
                                            g.dilations, g.pad_before, g.pad_after),
      attr, dnnl_engine(), hint);
}

dnnl::convolution_backward_weights::primitive_desc convolution_backward_weights_pd(
    const memory::desc& src, const memory::desc& diff_weights, const memory::desc& diff_dst, const WindowGeometry& g,
    const dnnl::convolution_forward::primitive_desc& hint, const dnnl::primitive_attr& attr) {
  return dnnl::convolution_backward_weights::primitive_desc(
      dnnl::convolution_backward_weights::desc(dnnl::algorithm::convolution_direct, src, diff_weights, diff_dst,
                                               g.strides, g.dilations, g.pad_before, g.pad_after),
      attr, dnnl_engine(), hint);
}

dnnl::pooling_forward::primitive_desc pooling_forward_pd(dnnl::algorithm algorithm, const memory::desc& src,
                                                         const memory::desc& dst, const WindowGeometry& g,
                                                         const memory::dims& kernel, const dnnl::primitive_attr& attr) {
  return dnnl::pooling_forward::primitive_desc(
      dnnl::pooling_forward::desc(dnnl::prop_kind::forward_inference, algorithm, src, dst, g.strides, kernel,
                                  g.pad_before, g.pad_after),
      attr, dnnl_engine());
}

dnnl::matmul::primitive_desc matmul_pd(const memory::desc& a, const memory::desc& b, const memory::desc& c,
                                       const dnnl::primitive_attr& attr) {
  return dnnl::matmul::primitive_desc(dnnl::matmul::desc(a, b, c), attr, dnnl_engine());
}

dnnl::eltwise_forward::primitive_desc eltwise_forward_pd(dnnl::algorithm algorithm, const memory::desc& data,
                                                         const dnnl::primitive_attr& attr) {
  return dnnl::eltwise_forward::primitive_desc(
      dnnl::eltwise_forward::desc(dnnl::prop_kind::forward_training, algorithm, data, 0.0f, 0.0f), attr, dnnl_engine());
}

dnnl::eltwise_backward::primitive_desc eltwise_backward_pd(dnnl::algorithm algorithm, const memory::desc& data,
                                                           const dnnl::eltwise_forward::primitive_desc& hint,
                                                           const dnnl::primitive_attr& attr) {
  return dnnl::eltwise_backward::primitive_desc(dnnl::eltwise_backward::desc(algorithm, data, data, 0.0f, 0.0f), attr,
                                                dnnl_engine(), hint);
}

dnnl::post_ops relu_post_op() {
  dnnl::post_ops post_ops;
  post_ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
  return post_ops;
}

#endif

}  // namespace mirra::ops::cpu
