// TFRecord files of tf.train.Example, as TensorFlow writes them, as a data set. A record is framed
// with its length and CRC-32Cs (runtime/data/tfrecord_framing.h); its bytes parse as an Example whose
// features the spec names (runtime/data/tfrecord_example.h). Uncompressed files are mapped and
// indexed (each record's place found once, its length's CRC checked), so examples are read at random
// and a file larger than memory is paged in as it is used; a record's bytes are checked against their
// CRC when read, and with `skip_corrupt` every record is checked when the data set opens and a corrupt
// one left out (and counted). GZIP files are a stream, inflated as they are read
// (runtime/data/tfrecord_stream.h). Errors name the file, the record and its byte offset, and the
// feature.
//
//   auto source = tfrecord_source({"train-00000-of-00002", "train-00001-of-00002"},
//                                 {.features = {{"image", {.type = "bytes", .shape = {28, 28, 1}, .decode = "image"}},
//                                               {"label", {.type = "int64", .shape = {}}}}});
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "graph/status.h"
#include "runtime/data/example_source.h"
#include "runtime/data/tfrecord_example.h"
#include "runtime/data/tfrecord_framing.h"

namespace mirra::runtime::data {

struct TfRecordOptions {
  std::map<std::string, TfFeature> features;  // the fields, by feature name
  bool gzip = false;                          // the files are GZIP-compressed (TensorFlow's compression_type="GZIP")
  bool skip_corrupt = false;                  // leave out records whose CRC does not match, counting them
};

// The data set of `paths` (their records in order), and how many corrupt records it left out.
struct TfRecordSource {
  std::shared_ptr<const ExampleSource> source;
  int64_t skipped = 0;
};
graph::Expected<TfRecordSource> tfrecord_source(const std::vector<std::string>& paths, const TfRecordOptions& options);

}  // namespace mirra::runtime::data
