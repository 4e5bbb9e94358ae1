#include "common/file_util.h"

#include <fcntl.h>
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

}  // namespace

Status WriteFileAtomically(const std::string& path, std::initializer_list<std::string_view> parts) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Status::IOError("cannot create " + tmp + ": " + ErrnoText());
  bool ok = true;
  for (std::string_view part : parts) ok = ok && WriteAll(fd, part.data(), part.size());
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
  const int dir = ::open(DirectoryOf(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) return Status::IOError("cannot open the directory of " + path + ": " + ErrnoText());
  const bool synced = ::fsync(dir) == 0;
  ::close(dir);
  if (!synced) return Status::IOError("cannot sync the directory of " + path + ": " + ErrnoText());
  return Status::OK();
}

Status ReadWholeFile(const std::string& path, std::string* out, uint64_t max_bytes) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return Status::NotFound("no file " + path);
    return Status::IOError("cannot open " + path + ": " + ErrnoText());
  }
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status::IOError(path + " is not a regular file");
  }
  if (uint64_t(st.st_size) > max_bytes) {
    ::close(fd);
    return Status::Corruption(path + " has " + std::to_string(st.st_size) +
                              " bytes, more than the " + std::to_string(max_bytes) + " allowed");
  }
  out->resize(size_t(st.st_size));
  size_t got = 0;
  while (got < out->size()) {
    const ssize_t r = ::read(fd, &(*out)[got], out->size() - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    got += size_t(r);
  }
  ::close(fd);
  if (got != out->size()) return Status::IOError("cannot read " + path + " in full");
  return Status::OK();
}

}  // namespace hedgedb
