#include "query/row_arena.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <new>

#include "common/crc32c.h"
#include "common/file_util.h"

namespace hedgedb {
namespace query {
namespace {

size_t PageBytes() {
  static const size_t page = size_t(::sysconf(_SC_PAGESIZE));
  return page;
}
size_t RoundUpToPage(size_t n) { return (n + PageBytes() - 1) / PageBytes() * PageBytes(); }
size_t RoundDownToPage(size_t n) { return n / PageBytes() * PageBytes(); }

// Addresses only: PROT_NONE pages take no memory and count against no
// commit limit until they are made writable.
uint8_t* ReserveRange(size_t bytes) {
  void* p = ::mmap(nullptr, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  return static_cast<uint8_t*>(p);
}

}  // namespace

RowArena::RowArena(size_t row_bytes, size_t min_reserved_bytes)
    : row_bytes_(row_bytes), min_reserved_bytes_(min_reserved_bytes) {}

RowArena::~RowArena() { Release(); }

void RowArena::Release() {
  if (base_) ::munmap(base_, reserved_bytes_);
  if (fd_ >= 0) ::close(fd_);
  base_ = nullptr;
  reserved_bytes_ = writable_bytes_ = mapped_bytes_ = mapped_pages_ = 0;
  rows_ = 0;
  fd_ = -1;
  file_offset_ = 0;
}

void RowArena::Clear() { Release(); }

void RowArena::Reserve(int64_t rows) {
  const size_t need = std::max<size_t>(size_t(rows) * row_bytes_, 1);
  if (need <= writable_bytes_) return;
  if (need > reserved_bytes_) {
    // Move to a larger range: the mapped file is mapped again at the new
    // place, the rows after it are copied.
    const size_t reserved = RoundUpToPage(std::max(2 * need, min_reserved_bytes_));
    uint8_t* fresh = ReserveRange(reserved);
    if (mapped_pages_ > 0 && ::mmap(fresh, mapped_pages_, PROT_READ, MAP_PRIVATE | MAP_FIXED, fd_,
                                    off_t(file_offset_)) == MAP_FAILED) {
      ::munmap(fresh, reserved);
      throw std::bad_alloc();
    }
    const size_t writable = RoundUpToPage(need);
    const size_t first_writable = RoundDownToPage(mapped_bytes_);
    if (::mprotect(fresh + first_writable, writable - first_writable, PROT_READ | PROT_WRITE) !=
        0) {
      ::munmap(fresh, reserved);
      throw std::bad_alloc();
    }
    const size_t used = size_t(rows_) * row_bytes_;
    if (used > mapped_bytes_)
      std::memcpy(fresh + mapped_bytes_, base_ + mapped_bytes_, used - mapped_bytes_);
    if (base_) ::munmap(base_, reserved_bytes_);
    base_ = fresh;
    reserved_bytes_ = reserved;
    writable_bytes_ = writable;
    return;
  }
  // Grow the writable part within the range, doubling (an untouched page
  // costs nothing, a call per row would).
  const size_t writable =
      std::min(reserved_bytes_, RoundUpToPage(std::max(need, 2 * writable_bytes_)));
  const size_t from = std::max(writable_bytes_, RoundDownToPage(mapped_bytes_));
  if (::mprotect(base_ + from, writable - from, PROT_READ | PROT_WRITE) != 0)
    throw std::bad_alloc();
  writable_bytes_ = writable;
}

void RowArena::Append(const uint8_t* row) {
  Reserve(rows_ + 1);
  std::memcpy(base_ + size_t(rows_) * row_bytes_, row, row_bytes_);
  ++rows_;
}

void RowArena::AdviseSequential(bool sequential) {
  if (mapped_pages_ == 0) return;
  // Advice only: a kernel that ignores it reads as it would anyway.
  (void)::madvise(base_, mapped_pages_, sequential ? MADV_SEQUENTIAL : MADV_RANDOM);
}

Status RowArena::MapFile(int fd, uint64_t offset, int64_t rows, const std::string& path) {
  Release();
  if (rows <= 0) return Status::OK();
  const size_t bytes = size_t(rows) * row_bytes_;
  // A page past the end of the file would fault (SIGBUS) at first touch.
  struct stat st;
  if (::fstat(fd, &st) != 0 || uint64_t(st.st_size) < offset ||
      uint64_t(st.st_size) - offset < bytes) {
    return Status::Corruption(path + " is shorter than the " + std::to_string(rows) +
                              " rows it should hold");
  }
  const size_t reserved = RoundUpToPage(std::max(2 * bytes, min_reserved_bytes_));
  try {
    base_ = ReserveRange(reserved);
  } catch (const std::bad_alloc&) {
    return Status::IOError("cannot reserve " + std::to_string(reserved) +
                           " bytes of addresses for " + path);
  }
  reserved_bytes_ = reserved;
  const size_t pages = RoundUpToPage(bytes);
  const int dup = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (dup >= 0 && offset % PageBytes() == 0 &&
      ::mmap(base_, pages, PROT_READ, MAP_PRIVATE | MAP_FIXED, fd, off_t(offset)) != MAP_FAILED) {
    fd_ = dup;
    file_offset_ = offset;
    mapped_bytes_ = bytes;
    mapped_pages_ = pages;
    // The last, partial page takes the first appended rows (copy on write).
    const size_t first_writable = RoundDownToPage(bytes);
    if (::mprotect(base_ + first_writable, pages - first_writable, PROT_READ | PROT_WRITE) != 0) {
      Release();
      return Status::IOError("cannot map " + path + ": " + std::strerror(errno));
    }
    writable_bytes_ = pages;
    rows_ = rows;
    return Status::OK();
  }
  // No mapping (a file system without mmap, say): read the rows instead.
  if (dup >= 0) ::close(dup);
  if (::mprotect(base_, pages, PROT_READ | PROT_WRITE) != 0) {
    Release();
    return Status::IOError("cannot allocate " + std::to_string(bytes) + " bytes for " + path);
  }
  writable_bytes_ = pages;
  if (!ReadFullyAt(fd, base_, bytes, offset)) {
    Release();
    return Status::IOError("cannot read " + path + " in full");
  }
  rows_ = rows;
  return Status::OK();
}

Status RowArena::CheckMapped(const std::string& path) const {
  if (mapped_bytes_ == 0 || Crc32c(base_, mapped_bytes_) == mapped_crc_) return Status::OK();
  return Status::Corruption("arena snapshot " + path +
                            " changed on disk after it was checked and mapped (a write from "
                            "outside hedgedb): the rows served since may be wrong; reopen the "
                            "database (it reads the records)");
}

}  // namespace query
}  // namespace hedgedb
