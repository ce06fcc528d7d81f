// Options of the windowed ops (Conv2D, MaxPool, AvgPool), shared by their builders.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace mirra::ops {

struct Conv2DOptions {
  std::vector<int64_t> strides = {1, 1};    // [height, width]
  std::string padding = "SAME";             // SAME, VALID or EXPLICIT
  std::vector<int64_t> explicit_paddings;   // EXPLICIT's: before and after each dim, in data_format order
  std::vector<int64_t> dilations = {1, 1};  // [height, width]
  std::string data_format = "NHWC";         // NHWC or NCHW
};

struct PoolOptions {
  std::vector<int64_t> ksize = {2, 2};    // [height, width]
  std::vector<int64_t> strides = {2, 2};  // [height, width]
  std::string padding = "VALID";          // SAME or VALID
  std::string data_format = "NHWC";       // NHWC or NCHW
};

}  // namespace mirra::ops
