// TFRecord files of tf.train.Example written by tests, for data sets no reference file holds (streams
// larger than memory, many shards): each Example encoded by hand in protobuf's wire format (the
// reader parses it with Debian's protobuf, so the two are independent), framed with its length and
// masked CRC-32Cs, written plain or through zlib's gzip writer. TensorFlow's own files
// (tests/runtime/tfrecord_reference) pin the format itself.
//
//   TfRecordWriter out("train.tfrecord.gz", /*gzip=*/true);
//   out.write(TfExampleBuilder().floats("x", values).int64s("y", {label}).bytes());
#pragma once

#include <zlib.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "runtime/data/tfrecord_framing.h"

namespace mirra::test {

class TfExampleBuilder {
 public:
  TfExampleBuilder& floats(const std::string& name, std::span<const float> values) {
    std::string packed(values.size() * sizeof(float), '\0');
    std::memcpy(packed.data(), values.data(), packed.size());
    return feature(name, 2, length_delimited(1, packed));  // Feature.float_list { packed value = 1 }
  }
  TfExampleBuilder& int64s(const std::string& name, std::span<const int64_t> values) {
    std::string packed;
    for (int64_t v : values) varint(packed, static_cast<uint64_t>(v));
    return feature(name, 3, length_delimited(1, packed));  // Feature.int64_list
  }
  TfExampleBuilder& raw(const std::string& name, const std::string& value) {
    return feature(name, 1, length_delimited(1, value));  // Feature.bytes_list { repeated bytes value = 1 }
  }
  // Example { Features features = 1 { map<string, Feature> feature = 1 } }.
  std::string bytes() const { return length_delimited(1, features_); }

 private:
  static void varint(std::string& out, uint64_t v) {
    while (v >= 0x80) {
      out += static_cast<char>((v & 0x7f) | 0x80);
      v >>= 7;
    }
    out += static_cast<char>(v);
  }
  static std::string length_delimited(uint32_t field, const std::string& payload) {
    std::string out;
    varint(out, (field << 3) | 2);
    varint(out, payload.size());
    return out + payload;
  }
  TfExampleBuilder& feature(const std::string& name, uint32_t kind, const std::string& list) {
    features_ += length_delimited(1, length_delimited(1, name) + length_delimited(2, length_delimited(kind, list)));
    return *this;
  }

  std::string features_;
};

class TfRecordWriter {
 public:
  TfRecordWriter(const std::string& path, bool gzip) {
    if (gzip) {
      gz_ = gzopen(path.c_str(), "wb1");
      if (gz_ == nullptr) throw std::runtime_error("cannot write " + path);
    } else {
      plain_.open(path, std::ios::binary);
      if (!plain_) throw std::runtime_error("cannot write " + path);
    }
  }
  ~TfRecordWriter() {
    if (gz_ != nullptr) gzclose(gz_);
  }

  void write(const std::string& record) {
    const std::string framed = runtime::data::tfrecord_frame(record);
    put(framed.data(), framed.size());
  }

 private:
  void put(const void* p, size_t n) {
    if (gz_ != nullptr) {
      if (gzwrite(gz_, p, static_cast<unsigned>(n)) != static_cast<int>(n)) throw std::runtime_error("gzwrite failed");
    } else {
      plain_.write(static_cast<const char*>(p), static_cast<std::streamsize>(n));
    }
  }

  gzFile gz_ = nullptr;
  std::ofstream plain_;
};

}  // namespace mirra::test
