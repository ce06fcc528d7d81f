// Bounded aligned reads and atomic writes with POSIX calls (fsync has no portable C++ form).
#include "serialization/file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "serialization/limits.h"

namespace mirra::serialization {

namespace {

graph::Status io_error(std::string_view action, const std::string& path) {
  return graph::invalid_argument("cannot " + std::string(action) + " '" + path + "': " + std::strerror(errno));
}

class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  ~FileDescriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

}  // namespace

AlignedBytes::AlignedBytes(size_t size)
    : data_(static_cast<uint8_t*>(::operator new[](std::max<size_t>(size, 1), std::align_val_t{64}))), size_(size) {}

AlignedBytes::AlignedBytes(std::span<const uint8_t> bytes) : AlignedBytes(bytes.size()) {
  if (!bytes.empty()) std::memcpy(data_.get(), bytes.data(), bytes.size());
}

std::span<const uint8_t> aligned_view(std::span<const uint8_t> bytes, AlignedBytes& storage) {
  if (reinterpret_cast<uintptr_t>(bytes.data()) % 64 == 0) return bytes;
  storage = AlignedBytes(bytes);
  return storage.span();
}

graph::Expected<AlignedBytes> read_file(const std::string& path, std::string_view what) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer. It has no effect on
  // reading a regular file, the only kind read past the check below.
  FileDescriptor fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (fd.get() < 0) return io_error("read " + std::string(what), path);
  struct stat info {};
  if (::fstat(fd.get(), &info) != 0) return io_error("stat " + std::string(what), path);
  if (!S_ISREG(info.st_mode)) return graph::invalid_argument(std::string(what) + " '" + path + "' is not a regular file");
  const auto size = static_cast<uint64_t>(info.st_size);
  if (size > kMaxFileBytes) {
    return graph::invalid_argument(std::string(what) + " '" + path + "' is " + std::to_string(size) +
                                   " bytes, over the limit of " + std::to_string(kMaxFileBytes));
  }
  AlignedBytes bytes(static_cast<size_t>(size));
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::read(fd.get(), bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return io_error("read " + std::string(what), path);
    if (n == 0) return graph::invalid_argument(std::string(what) + " '" + path + "' shrank while being read");
    done += static_cast<size_t>(n);
  }
  return bytes;
}

graph::Expected<std::string> read_text_file(const std::string& path, std::string_view what) {
  MIRRA_ASSIGN_OR_RETURN(const AlignedBytes bytes, read_file(path, what));
  return std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

graph::Expected<std::string> resolve_write_target(const std::string& path, std::string_view what) {
  std::filesystem::path target(path);
  for (int hop = 0;; ++hop) {
    struct stat info {};
    if (::lstat(target.c_str(), &info) != 0) {
      if (errno == ENOENT) return target.string();  // a new file
      return io_error("inspect " + std::string(what), path);
    }
    if (S_ISREG(info.st_mode)) return target.string();
    if (!S_ISLNK(info.st_mode)) {
      return graph::invalid_argument(std::string(what) + " '" + path + "' is " +
                                     (target.string() == path ? "" : "a link to '" + target.string() + "', ") +
                                     "not a regular file: refusing to replace it");
    }
    if (hop == 40) return graph::invalid_argument(std::string(what) + " '" + path + "': too many levels of symbolic links");
    std::error_code ec;
    const std::filesystem::path next = std::filesystem::read_symlink(target, ec);
    if (ec) return graph::invalid_argument("cannot read the link " + std::string(what) + " '" + path + "': " + ec.message());
    target = next.is_absolute() ? next : target.parent_path() / next;
  }
}

graph::Status check_writable_directory(const std::string& dir, std::string_view what) {
  std::string probe = (std::filesystem::path(dir.empty() ? "." : dir) / ".mirra-write-check-XXXXXX").string();
  FileDescriptor fd(::mkstemp(probe.data()));
  if (fd.get() < 0) {
    return graph::invalid_argument("cannot write in " + std::string(what) + " '" + dir + "': " + std::strerror(errno));
  }
  ::unlink(probe.c_str());
  return graph::Status();
}

graph::Status check_writable_file(const std::string& path, std::string_view what) {
  if (path.empty()) return graph::Status();
  MIRRA_ASSIGN_OR_RETURN(const std::string target, resolve_write_target(path, what));
  const graph::Status status = check_writable_directory(std::filesystem::path(target).parent_path().string(), "the directory of");
  return status.ok() ? status : graph::invalid_argument("cannot write " + std::string(what) + " '" + path + "': " + status.message());
}

graph::Status write_file_atomically(const std::string& requested, std::span<const uint8_t> bytes) {
  MIRRA_ASSIGN_OR_RETURN(const std::string path, resolve_write_target(requested, "file"));
  const std::filesystem::path target(path);
  std::filesystem::path directory = target.parent_path();
  if (directory.empty()) directory = ".";
  std::string temporary = (directory / ("." + target.filename().string() + ".tmp-XXXXXX")).string();
  FileDescriptor fd(::mkstemp(temporary.data()));
  if (fd.get() < 0) return io_error("create a temporary file for", path);
  auto fail = [&](std::string_view action) {
    graph::Status status = io_error(action, path);
    ::unlink(temporary.c_str());
    return status;
  };
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd.get(), bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return fail("write");
    done += static_cast<size_t>(n);
  }
  if (::fchmod(fd.get(), 0644) != 0 || ::fsync(fd.get()) != 0) return fail("sync");
  if (::close(fd.release()) != 0) return fail("close");
  if (::rename(temporary.c_str(), path.c_str()) != 0) return fail("rename a temporary file onto");
  FileDescriptor dir(::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir.get() < 0 || ::fsync(dir.get()) != 0) return io_error("sync the directory of", path);
  return graph::Status();
}

}  // namespace mirra::serialization
