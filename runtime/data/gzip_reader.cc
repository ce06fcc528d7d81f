// GzipReader: zlib's inflate over a file read 256 KiB at a time, members followed one after another.
// Not zlib's gzread: it takes bytes after a member that do not begin another for trailing garbage and
// ends there without a word, which would lose the records of a damaged member silently.
#include "runtime/data/gzip_reader.h"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <vector>

namespace mirra::runtime::data {

namespace {
constexpr size_t kInputBytes = size_t{1} << 18;
}  // namespace

struct GzipReader::State {
  int fd = -1;
  z_stream z{};
  bool started = false;     // inflateInit2 has run
  bool in_member = false;   // a member has begun and not ended
  bool any_member = false;  // a member has ended
  bool file_ended = false;  // every byte of the file has been read
  std::vector<unsigned char> input = std::vector<unsigned char>(kInputBytes);
};

GzipReader::GzipReader(std::string name) : name_(std::move(name)), state_(std::make_unique<State>()) {}

GzipReader::~GzipReader() {
  if (state_->started) inflateEnd(&state_->z);
  if (state_->fd >= 0) ::close(state_->fd);
}

graph::Expected<std::unique_ptr<GzipReader>> GzipReader::open(const std::string& path, std::string name) {
  std::unique_ptr<GzipReader> reader(new GzipReader(std::move(name)));
  reader->state_->fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (reader->state_->fd < 0) return graph::not_found(reader->name_ + " cannot be opened: " + std::strerror(errno));
  if (inflateInit2(&reader->state_->z, 16 + MAX_WBITS) != Z_OK) return graph::internal_error("zlib could not start");
  reader->state_->started = true;
  return reader;
}

graph::Expected<bool> GzipReader::fill() {
  State& s = *state_;
  if (s.z.avail_in > 0) return true;
  if (s.file_ended) return false;
  ssize_t got;
  do {
    got = ::read(s.fd, s.input.data(), s.input.size());
  } while (got < 0 && errno == EINTR);
  if (got < 0) return graph::internal_error(name_ + " could not be read: " + std::strerror(errno));
  if (got == 0) {
    s.file_ended = true;
    return false;
  }
  s.z.next_in = s.input.data();
  s.z.avail_in = static_cast<uInt>(got);
  return true;
}

graph::Expected<size_t> GzipReader::read(std::span<std::byte> out) {
  State& s = *state_;
  size_t done = 0;
  while (done < out.size() && !ended_) {
    MIRRA_ASSIGN_OR_RETURN(const bool more, fill());
    if (!more) {
      if (s.in_member || !s.any_member) return graph::invalid_argument(name_ + ": a truncated GZIP file");
      ended_ = true;  // the last member ended with the file
      break;
    }
    s.in_member = true;
    s.z.next_out = reinterpret_cast<Bytef*>(out.data() + done);
    s.z.avail_out = static_cast<uInt>(std::min<size_t>(out.size() - done, UINT32_MAX));
    const uInt before = s.z.avail_out;
    const int status = inflate(&s.z, Z_NO_FLUSH);
    const size_t produced = before - s.z.avail_out;
    done += produced;
    position_ += produced;
    if (status == Z_STREAM_END) {
      s.in_member = false;  // another member may follow
      s.any_member = true;
      inflateReset(&s.z);
    } else if (status != Z_OK && !(status == Z_BUF_ERROR && s.z.avail_in == 0)) {
      return graph::invalid_argument(name_ + ": not a GZIP file, or a damaged one (zlib: " +
                                     (s.z.msg != nullptr ? std::string(s.z.msg) : std::to_string(status)) + ")");
    }
  }
  return done;
}

}  // namespace mirra::runtime::data
