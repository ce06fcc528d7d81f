// Token files for language models, as a data set of windows: a flat file of token ids (u16 or u32
// little-endian, nanoGPT's train.bin written by numpy's tofile; or u8, a text file read as bytes),
// mapped into memory, served as windows of `context` + 1 tokens: the field "inputs" holds the first
// `context` and "targets" the `context` after them (each token's next). In order, example i is the
// window starting at token i x context, so an epoch covers the file once; at random offsets
// (nanoGPT's sampling), example i of epoch e starts at an offset drawn from (the Dataset's seed, e,
// i), uniform over every window the file holds, so an epoch's windows are the same whatever the
// batching, replica or worker count. An epoch has (tokens - 1) / context examples either way.
//
//   auto source = token_windows("train.bin", {.type = ElementType::u16, .context = 256, .random_offsets = true});
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "graph/status.h"
#include "runtime/data/example_source.h"

namespace mirra::runtime::data {

struct TokenWindowOptions {
  ElementType type = ElementType::u16;  // u8, u16 or u32
  int64_t context = 256;
  bool random_offsets = false;  // drawn from the data set's seed, the epoch and the example
};

graph::Expected<std::shared_ptr<const ExampleSource>> token_windows(const std::string& path, const TokenWindowOptions& options);

}  // namespace mirra::runtime::data
