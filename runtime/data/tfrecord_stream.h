// GZIP-compressed TFRecord files as a stream (runtime/data/stream_source.h): each file inflated as it
// is read, never whole, so a data set larger than memory streams. Opening reads every file once, to
// check each record's framing and CRCs (errors name the file, the record and its byte offset in the
// inflated file) and to count the records; corrupt records are then left out with `skip_corrupt`.
#pragma once

#include <string>
#include <vector>

#include "graph/status.h"
#include "runtime/data/tfrecord_file.h"

namespace mirra::runtime::data {

graph::Expected<TfRecordSource> gzip_tfrecord_stream(const std::vector<std::string>& paths, const TfRecordOptions& options,
                                                     std::string name);

}  // namespace mirra::runtime::data
