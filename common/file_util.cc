#include "common/file_util.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace hedgedb {
namespace {

std::string ErrnoText() { return std::strerror(errno); }

bool WriteAll(int fd, const char* p, size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += w;
    n -= size_t(w);
  }
  return true;
}

std::string DirectoryOf(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

Status WriteParts(const std::string& path, const std::string_view* parts, size_t n_parts) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Status::IOError("cannot create " + tmp + ": " + ErrnoText());
  bool ok = true;
  for (size_t i = 0; i < n_parts; ++i) ok = ok && WriteAll(fd, parts[i].data(), parts[i].size());
  ok = ok && ::fsync(fd) == 0;
  const int saved_errno = errno;
  ok = (::close(fd) == 0) && ok;
  if (!ok) {
    ::unlink(tmp.c_str());
    return Status::IOError("cannot write " + tmp + ": " + std::strerror(saved_errno));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = ErrnoText();
    ::unlink(tmp.c_str());
    return Status::IOError("cannot rename " + tmp + " to " + path + ": " + why);
  }
  return SyncDirectory(DirectoryOf(path));
}

}  // namespace

Status MakeDir(const std::string& path) {
  if (::mkdir(path.c_str(), 0755) == 0 || errno == EEXIST) return Status::OK();
  return Status::IOError("cannot create directory " + path + ": " + std::strerror(errno));
}

Status SyncDirectory(const std::string& dir_path) {
  const int dir = ::open(dir_path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) return Status::IOError("cannot open directory " + dir_path + ": " + ErrnoText());
  const bool synced = ::fsync(dir) == 0;
  ::close(dir);
  if (!synced) return Status::IOError("cannot sync directory " + dir_path + ": " + ErrnoText());
  return Status::OK();
}

Status WriteFileAtomically(const std::string& path, std::initializer_list<std::string_view> parts) {
  return WriteParts(path, parts.begin(), parts.size());
}

Status WriteFileAtomically(const std::string& path, const std::vector<std::string_view>& parts) {
  return WriteParts(path, parts.data(), parts.size());
}

FdCloser::~FdCloser() {
  if (fd_ >= 0) ::close(fd_);
}

Status OpenRegularFile(const std::string& path, int* fd, uint64_t* size) {
  *fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (*fd < 0) {
    if (errno == ENOENT) return Status::NotFound("no file " + path);
    return Status::IOError("cannot open " + path + ": " + ErrnoText());
  }
  struct stat st;
  if (::fstat(*fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(*fd);
    *fd = -1;
    return Status::IOError(path + " is not a regular file");
  }
  *size = uint64_t(st.st_size);
  return Status::OK();
}

bool ReadFullyAt(int fd, void* p, size_t n, uint64_t offset) {
  char* out = static_cast<char*>(p);
  while (n > 0) {
    const ssize_t r = ::pread(fd, out, n, off_t(offset));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    out += r;
    n -= size_t(r);
    offset += uint64_t(r);
  }
  return true;
}

Status ReadWholeFile(const std::string& path, std::string* out, uint64_t max_bytes) {
  int fd = -1;
  uint64_t size = 0;
  HEDGEDB_RETURN_IF_ERROR(OpenRegularFile(path, &fd, &size));
  if (size > max_bytes) {
    ::close(fd);
    return Status::Corruption(path + " has " + std::to_string(size) + " bytes, more than the " +
                              std::to_string(max_bytes) + " allowed");
  }
  out->resize(size_t(size));
  const bool read = ReadFullyAt(fd, out->data(), out->size(), 0);
  ::close(fd);
  if (!read) return Status::IOError("cannot read " + path + " in full");
  return Status::OK();
}

MappedFile::~MappedFile() {
  if (mapping_) ::munmap(mapping_, size_);
}

Status MappedFile::Open(const std::string& path) {
  int fd = -1;
  uint64_t size = 0;
  HEDGEDB_RETURN_IF_ERROR(OpenRegularFile(path, &fd, &size));
  size_ = size_t(size);
  if (size_ > 0) {
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p != MAP_FAILED) {
      mapping_ = p;
      data_ = static_cast<const char*>(p);
    }
  }
  ::close(fd);
  if (mapping_ || size_ == 0) return Status::OK();
  HEDGEDB_RETURN_IF_ERROR(ReadWholeFile(path, &copy_));
  data_ = copy_.data();
  size_ = copy_.size();
  return Status::OK();
}

}  // namespace hedgedb
