// MappedFile: open, fstat and mmap (an empty file maps to nothing), munmap when the last view goes.
#include "runtime/data/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace mirra::runtime::data {

graph::Expected<std::shared_ptr<const MappedFile>> MappedFile::open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return graph::invalid_argument("cannot open '" + path + "': " + std::strerror(errno));
  struct stat status {};
  if (::fstat(fd, &status) != 0 || !S_ISREG(status.st_mode)) {
    const int error = errno;
    ::close(fd);
    return graph::invalid_argument("'" + path + "' is not a regular file" +
                                   (error != 0 ? std::string(": ") + std::strerror(error) : std::string()));
  }
  auto file = std::shared_ptr<MappedFile>(new MappedFile());
  file->path_ = path;
  file->size_ = static_cast<size_t>(status.st_size);
  if (file->size_ > 0) {
    void* data = ::mmap(nullptr, file->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (data == MAP_FAILED) {
      const int error = errno;
      ::close(fd);
      return graph::invalid_argument("cannot map '" + path + "' into memory: " + std::strerror(error));
    }
    file->data_ = static_cast<const std::byte*>(data);
  }
  ::close(fd);  // the mapping stays
  return std::shared_ptr<const MappedFile>(std::move(file));
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<std::byte*>(data_), size_);
}

}  // namespace mirra::runtime::data
