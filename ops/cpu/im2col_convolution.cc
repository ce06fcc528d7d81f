// im2col convolutions: each image's output pixels in blocks; a block's patches unfolded into rows of
// a matrix [pixels, KH * KW * C], whose product with the HWIO filter (a [KH * KW * C, CO] matrix as
// it is stored) is the block's output. The gradients are the two other products, the input's folded
// back onto the image.
#include "ops/cpu/im2col_convolution.h"

#include <algorithm>
#include <cstring>

#include "ops/cpu/blas.h"
#include "ops/cpu/parallel.h"
#include "runtime/tensor.h"

namespace mirra::ops::cpu {

namespace {

// Most elements of one block's unfolded patches (2 MiB of doubles).
constexpr int64_t kBlockElements = int64_t{1} << 18;
// Images are split into at most this many groups for the filter gradient, fixed by the batch size, so
// that its sums do not depend on the thread count.
constexpr int64_t kMostFilterGradientGroups = 8;

// Sizes and index arithmetic shared by the three directions.
struct Layout {
  const UnfoldedConvolution& c;
  int64_t pixels = c.g.out_height * c.g.out_width;                         // P
  int64_t patch = c.filter_height * c.filter_width * c.g.channels;         // K
  int64_t image = c.g.height * c.g.width * c.g.channels;                   // input elements of an image
  int64_t block_rows = std::clamp<int64_t>(kBlockElements / std::max<int64_t>(patch, 1), 1, std::max<int64_t>(pixels, 1));
  int64_t blocks = (pixels + block_rows - 1) / block_rows;

  // Offset of input element (h, w, ch) within its image.
  int64_t input_offset(int64_t h, int64_t w, int64_t ch) const {
    return c.nchw ? (ch * c.g.height + h) * c.g.width + w : (h * c.g.width + w) * c.g.channels + ch;
  }

  // Calls f(row, patch_offset, input_offset) for each element of the block's patches that lies
  // inside the image, and z(row, patch_offset, count) for each run of `count` that lies in padding.
  template <class Inside, class Padding>
  void for_each_patch_element(int64_t first_pixel, int64_t rows, const Inside& f, const Padding& z) const {
    const WindowGeometry& g = c.g;
    const int64_t C = g.channels;
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t p = first_pixel + r, oh = p / g.out_width, ow = p % g.out_width;
      for (int64_t kh = 0; kh < c.filter_height; ++kh) {
        const int64_t ih = oh * g.strides[0] - g.pad_before[0] + kh * (g.dilations[0] + 1);
        for (int64_t kw = 0; kw < c.filter_width; ++kw) {
          const int64_t iw = ow * g.strides[1] - g.pad_before[1] + kw * (g.dilations[1] + 1);
          const int64_t k = (kh * c.filter_width + kw) * C;
          if (ih < 0 || ih >= g.height || iw < 0 || iw >= g.width) {
            z(r, k, C);
            continue;
          }
          for (int64_t ch = 0; ch < C; ++ch) f(r, k + ch, input_offset(ih, iw, ch));
        }
      }
    }
  }

  // The block's patches of one image as rows of `col` [rows, K].
  void unfold(const double* x, int64_t first_pixel, int64_t rows, double* col) const {
    for_each_patch_element(
        first_pixel, rows, [&](int64_t r, int64_t k, int64_t at) { col[r * patch + k] = x[at]; },
        [&](int64_t r, int64_t k, int64_t count) { std::fill_n(col + r * patch + k, count, 0.0); });
  }

  // Adds the block's patch gradients `col` [rows, K] back onto one image's gradient.
  void fold_add(const double* col, int64_t first_pixel, int64_t rows, double* dx) const {
    for_each_patch_element(
        first_pixel, rows, [&](int64_t r, int64_t k, int64_t at) { dx[at] += col[r * patch + k]; },
        [](int64_t, int64_t, int64_t) {});
  }

  // A scratch matrix of `rows` x `columns` doubles.
  runtime::Tensor matrix(int64_t rows, int64_t columns) const {
    return runtime::Tensor::empty(c.scratch, graph::DType::f64, runtime::TensorShape{rows, columns});
  }

  // The rows of image n's output-shaped tensor `y` (NHWC or NCHW) for pixels [first, first + rows) as a
  // [rows, CO] matrix: in place for NHWC, gathered into `buffer` for NCHW.
  const double* pixel_rows(const double* y, int64_t n, int64_t first, int64_t rows, double* buffer) const {
    const int64_t CO = c.out_channels;
    if (!c.nchw) return y + (n * pixels + first) * CO;
    for (int64_t co = 0; co < CO; ++co) {
      const double* plane = y + (n * CO + co) * pixels + first;
      for (int64_t r = 0; r < rows; ++r) buffer[r * CO + co] = plane[r];
    }
    return buffer;
  }
};

}  // namespace

void im2col_conv2d_forward(const UnfoldedConvolution& c, const double* input, const double* filter, double* output) {
  const Layout l{c};
  const int64_t CO = c.out_channels;
  parallel_for(c.g.batch * l.blocks, 1, [&](int64_t begin, int64_t end) {
    for (int64_t task = begin; task < end; ++task) {
      const int64_t n = task / l.blocks, first = task % l.blocks * l.block_rows;
      const int64_t rows = std::min(l.block_rows, l.pixels - first);
      runtime::Tensor col = l.matrix(rows, l.patch);
      l.unfold(input + n * l.image, first, rows, col.mutable_data<double>());
      if (!c.nchw) {
        gemm(false, false, rows, CO, l.patch, col.data<double>(), filter, output + (n * l.pixels + first) * CO, c.scratch);
        continue;
      }
      runtime::Tensor block = l.matrix(rows, CO);
      const double* y = block.data<double>();
      gemm(false, false, rows, CO, l.patch, col.data<double>(), filter, block.mutable_data<double>(), c.scratch);
      for (int64_t co = 0; co < CO; ++co) {
        double* plane = output + (n * CO + co) * l.pixels + first;
        for (int64_t r = 0; r < rows; ++r) plane[r] = y[r * CO + co];
      }
    }
  });
}

void im2col_conv2d_backward_data(const UnfoldedConvolution& c, const double* dy, const double* filter, double* dx) {
  const Layout l{c};
  const int64_t CO = c.out_channels;
  // Blocks of one image overlap on its gradient, so an image is one task.
  parallel_for(c.g.batch, 1, [&](int64_t begin, int64_t end) {
    runtime::Tensor col = l.matrix(l.block_rows, l.patch);
    runtime::Tensor gathered = l.matrix(c.nchw ? l.block_rows : 0, CO);
    for (int64_t n = begin; n < end; ++n) {
      double* image = dx + n * l.image;
      std::fill_n(image, l.image, 0.0);
      for (int64_t first = 0; first < l.pixels; first += l.block_rows) {
        const int64_t rows = std::min(l.block_rows, l.pixels - first);
        const double* dy_rows = l.pixel_rows(dy, n, first, rows, gathered.mutable_data<double>());
        gemm(false, true, rows, l.patch, CO, dy_rows, filter, col.mutable_data<double>(), c.scratch);
        l.fold_add(col.data<double>(), first, rows, image);
      }
    }
  });
}

void im2col_conv2d_backward_filter(const UnfoldedConvolution& c, const double* input, const double* dy, double* dw) {
  const Layout l{c};
  const int64_t CO = c.out_channels, weights = l.patch * CO;
  const int64_t groups = std::clamp<int64_t>(c.g.batch, 1, kMostFilterGradientGroups);
  const int64_t per_group = (c.g.batch + groups - 1) / groups;
  runtime::Tensor partials = l.matrix(groups, weights);
  double* sums = partials.mutable_data<double>();
  std::fill_n(sums, groups * weights, 0.0);
  parallel_for(groups, 1, [&](int64_t begin, int64_t end) {
    runtime::Tensor col = l.matrix(l.block_rows, l.patch);
    runtime::Tensor gathered = l.matrix(c.nchw ? l.block_rows : 0, CO);
    runtime::Tensor product = l.matrix(l.patch, CO);
    for (int64_t group = begin; group < end; ++group) {
      double* sum = sums + group * weights;
      for (int64_t n = group * per_group; n < std::min(c.g.batch, (group + 1) * per_group); ++n) {
        for (int64_t first = 0; first < l.pixels; first += l.block_rows) {
          const int64_t rows = std::min(l.block_rows, l.pixels - first);
          l.unfold(input + n * l.image, first, rows, col.mutable_data<double>());
          const double* dy_rows = l.pixel_rows(dy, n, first, rows, gathered.mutable_data<double>());
          gemm(true, false, l.patch, CO, rows, col.data<double>(), dy_rows, product.mutable_data<double>(), c.scratch);
          const double* p = product.data<double>();
          for (int64_t i = 0; i < weights; ++i) sum[i] += p[i];
        }
      }
    }
  });
  std::memcpy(dw, sums, static_cast<size_t>(weights) * sizeof(double));
  for (int64_t group = 1; group < groups; ++group) {
    for (int64_t i = 0; i < weights; ++i) dw[i] += sums[group * weights + i];
  }
}

}  // namespace mirra::ops::cpu
