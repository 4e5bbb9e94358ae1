// A small tmpfs mounted on a fresh directory for the test's lifetime: a real
// file system that fills up. Needs root (CAP_SYS_ADMIN); Mount() says why not.
#pragma once

#include <stdlib.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>

namespace hedgedb {
namespace testing_util {

class ScopedTmpfs {
 public:
  ScopedTmpfs() = default;
  ScopedTmpfs(const ScopedTmpfs&) = delete;
  ScopedTmpfs& operator=(const ScopedTmpfs&) = delete;
  // Unmounts even if the test failed half-way (lazily if files are open).
  ~ScopedTmpfs() {
    if (mounted_ && ::umount(path_.c_str()) != 0) ::umount2(path_.c_str(), MNT_DETACH);
    if (!path_.empty()) ::rmdir(path_.c_str());
  }

  // Mounts a tmpfs of `size` ("8m") on a new directory; "" on success, else
  // why it could not (not root, mount not permitted).
  std::string Mount(const std::string& size) {
    if (::geteuid() != 0) return "mounting a tmpfs needs root";
    std::string pattern =
        (std::filesystem::temp_directory_path() / "hedgedb-tmpfs.XXXXXX").string();
    if (::mkdtemp(&pattern[0]) == nullptr) return std::string("mkdtemp: ") + std::strerror(errno);
    path_ = pattern;
    const std::string data = "size=" + size + ",mode=0700";
    if (::mount("tmpfs", path_.c_str(), "tmpfs", 0, data.c_str()) != 0) {
      return std::string("mount -t tmpfs is not permitted here: ") + std::strerror(errno);
    }
    mounted_ = true;
    return "";
  }

  // Grows (or shrinks) the mounted file system: frees space for a reopen.
  bool Resize(const std::string& size) {
    const std::string data = "size=" + size;
    return ::mount("tmpfs", path_.c_str(), "tmpfs", MS_REMOUNT, data.c_str()) == 0;
  }

  const std::string& path() const { return path_; }

 private:
  std::string path_;
  bool mounted_ = false;
};

}  // namespace testing_util
}  // namespace hedgedb
