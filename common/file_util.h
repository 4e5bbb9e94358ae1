// Whole-file reads and the one atomic file write of the project (index files,
// model files, .npy outputs, caches): a file is either its old content or its
// complete new content, also after a crash or power loss.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "hedgedb/status.h"

namespace hedgedb {

// Writes the concatenation of `parts` to `path`: to `path`.tmp.<pid>, fsync,
// rename over `path`, fsync of the directory (so the rename is durable too).
// On error the temporary file is removed and `path` is untouched.
Status WriteFileAtomically(const std::string& path, std::initializer_list<std::string_view> parts);
// The same for a number of parts known only at run time.
Status WriteFileAtomically(const std::string& path, const std::vector<std::string_view>& parts);
// fsync of a directory, so that renames and new files in it are durable.
Status SyncDirectory(const std::string& dir_path);
// Creates the directory `path` (mode 0755); one that exists already is fine.
Status MakeDir(const std::string& path);

// Reads the whole regular file at `path` into *out. A file larger than
// `max_bytes` is an error, checked before anything is allocated.
Status ReadWholeFile(const std::string& path, std::string* out,
                     uint64_t max_bytes = uint64_t(1) << 40);

// Closes a file descriptor at scope exit (a negative one is ignored).
class FdCloser {
 public:
  explicit FdCloser(int fd) : fd_(fd) {}
  ~FdCloser();
  FdCloser(const FdCloser&) = delete;
  FdCloser& operator=(const FdCloser&) = delete;

 private:
  int fd_;
};

// Opens the regular file at `path` for reading: *fd (the caller closes it)
// and its *size. NotFound if there is no file.
Status OpenRegularFile(const std::string& path, int* fd, uint64_t* size);

// Reads exactly `n` bytes at `offset` of `fd` (false on an error or an early
// end of file).
bool ReadFullyAt(int fd, void* p, size_t n, uint64_t offset);

// A whole file, read-only: memory-mapped where the file system allows (the
// pages come from the page cache, no copy), read into memory otherwise.
class MappedFile {
 public:
  MappedFile() = default;
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  // NotFound if there is no file at `path`.
  Status Open(const std::string& path);
  std::string_view bytes() const { return {data_, size_}; }

 private:
  const char* data_ = nullptr;
  size_t size_ = 0;
  void* mapping_ = nullptr;  // munmap'ed at destruction
  std::string copy_;         // the fallback
};

}  // namespace hedgedb
