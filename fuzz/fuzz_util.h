// Helpers shared by the fuzz targets: a scratch file or directory per process
// for the parsers that read paths, and a checksum fix-up so that inputs get
// past a CRC to the checks behind it.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "common/coding.h"
#include "common/crc32c.h"

namespace hedgedb::fuzz {

// A directory of its own under $TMPDIR (default /tmp), removed at exit.
inline const std::filesystem::path& ScratchDir() {
  static const std::filesystem::path dir = [] {
    const char* tmp = std::getenv("TMPDIR");
    std::filesystem::path d = std::filesystem::path(tmp != nullptr ? tmp : "/tmp") /
                              ("hedgedb-fuzz-" + std::to_string(getpid()));
    std::filesystem::create_directories(d);
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(ScratchDir(), ec);
    });
    return d;
  }();
  return dir;
}

// Writes `size` bytes to ScratchDir()/name and returns the path.
inline std::string WriteScratch(const std::string& name, const uint8_t* data, size_t size) {
  const std::string path = (ScratchDir() / name).string();
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), std::streamsize(size));
  return path;
}

// Replaces the last 4 bytes of `bytes` with the CRC32C of the rest.
inline void FixTrailingCrc(std::string* bytes) {
  if (bytes->size() < 4) return;
  const uint32_t crc = Crc32c(bytes->data(), bytes->size() - 4);
  std::string le;
  PutFixed<uint32_t>(&le, crc);
  bytes->replace(bytes->size() - 4, 4, le);
}

}  // namespace hedgedb::fuzz
