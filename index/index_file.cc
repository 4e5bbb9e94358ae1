#include "index/index_file.h"

#include <cstring>

#include "common/coding.h"
#include "common/crc32c.h"

namespace hedgedb {
namespace index {
namespace {

constexpr char kMagic[8] = {'H', 'E', 'D', 'G', 'E', 'I', 'D', 'X'};
constexpr size_t kCrcOffset = kIndexHeaderBytes - 4;

uint32_t FileCrc(std::string_view header, std::string_view blob) {
  const uint32_t crc = Crc32c(header.data() + 8, kCrcOffset - 8);
  return Crc32c(blob.data(), blob.size(), crc);
}

}  // namespace

std::string EncodeIndexFileHeader(uint32_t recall_bp, uint64_t sequence, uint64_t binding,
                                  std::string_view blob) {
  std::string header(kMagic, 8);
  PutFixed<uint32_t>(&header, kIndexFileVersion);
  PutFixed<uint32_t>(&header, recall_bp);
  PutFixed<uint64_t>(&header, sequence);
  PutFixed<uint64_t>(&header, binding);
  PutFixed<uint64_t>(&header, blob.size());
  PutFixed<uint32_t>(&header, FileCrc(header, blob));
  return header;
}

Status ParseIndexFileHeader(std::string_view header, uint64_t file_size, const std::string& path,
                            IndexFileHeader* out) {
  if (header.size() < kIndexHeaderBytes || file_size < kIndexHeaderBytes ||
      std::memcmp(header.data(), kMagic, 8) != 0) {
    return Status::Corruption("index file " + path + " has a bad header");
  }
  IndexFileHeader h;
  h.version = GetFixed<uint32_t>(header.data() + 8);
  h.recall_bp = GetFixed<uint32_t>(header.data() + 12);
  h.sequence = GetFixed<uint64_t>(header.data() + 16);
  h.binding = GetFixed<uint64_t>(header.data() + 24);
  h.blob_bytes = GetFixed<uint64_t>(header.data() + 32);
  h.crc = GetFixed<uint32_t>(header.data() + kCrcOffset);
  if (h.version != kIndexFileVersion) {
    return Status::Corruption("index file " + path + " has format version " +
                              std::to_string(h.version) + ", this build writes " +
                              std::to_string(kIndexFileVersion));
  }
  if (h.blob_bytes != file_size - kIndexHeaderBytes) {
    return Status::Corruption("index file " + path + " is truncated or has trailing bytes (" +
                              std::to_string(file_size) + " bytes, header says " +
                              std::to_string(kIndexHeaderBytes) + " + " +
                              std::to_string(h.blob_bytes) + ")");
  }
  *out = h;
  return Status::OK();
}

Status CheckIndexFileBlob(std::string_view header, const IndexFileHeader& parsed,
                          std::string_view blob, uint64_t binding, const std::string& path) {
  if (header.size() < kIndexHeaderBytes || blob.size() != parsed.blob_bytes ||
      FileCrc(header, blob) != parsed.crc) {
    return Status::Corruption("index file " + path + " fails its checksum");
  }
  if (parsed.binding != binding) {
    return Status::Corruption("index file " + path +
                              " belongs to another collection or database (binding mismatch)");
  }
  return Status::OK();
}

}  // namespace index
}  // namespace hedgedb
