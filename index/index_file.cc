#include "index/index_file.h"

#include <cstring>

#include "common/coding.h"
#include "common/crc32c.h"

namespace hedgedb {
namespace index {
namespace {

constexpr char kMagic[8] = {'H', 'E', 'D', 'G', 'E', 'I', 'D', 'X'};
// The checksum covers the header from the version to the crc (at
// header_bytes - 4), then the blob.
uint32_t FileCrc(std::string_view header, size_t header_bytes, std::string_view blob) {
  const uint32_t crc = Crc32c(header.data() + 8, header_bytes - 12);
  return Crc32c(blob.data(), blob.size(), crc);
}

std::string HeaderPrefix(uint32_t version, uint32_t recall_bp, uint64_t sequence, uint64_t binding,
                         std::string_view blob) {
  std::string header(kMagic, 8);
  PutFixed<uint32_t>(&header, version);
  PutFixed<uint32_t>(&header, recall_bp);
  PutFixed<uint64_t>(&header, sequence);
  PutFixed<uint64_t>(&header, binding);
  PutFixed<uint64_t>(&header, blob.size());
  return header;
}

}  // namespace

std::string EncodeIndexFileHeader(const IndexFileHeader& f, std::string_view blob) {
  std::string header = HeaderPrefix(kIndexFileVersion, f.recall_bp, f.sequence, f.binding, blob);
  PutFixed<uint32_t>(&header, f.coarse_recall_bp);
  PutFixed<uint32_t>(&header, f.oversampling);
  PutFixed<uint32_t>(&header, FileCrc(header, kIndexHeaderBytes, blob));
  return header;
}

std::string EncodeIndexFileHeader(uint32_t recall_bp, uint64_t sequence, uint64_t binding,
                                  std::string_view blob) {
  IndexFileHeader f;
  f.recall_bp = recall_bp;
  f.sequence = sequence;
  f.binding = binding;
  return EncodeIndexFileHeader(f, blob);
}

std::string EncodeIndexFileHeaderV2(uint32_t recall_bp, uint64_t sequence, uint64_t binding,
                                    std::string_view blob) {
  std::string header = HeaderPrefix(2, recall_bp, sequence, binding, blob);
  PutFixed<uint32_t>(&header, FileCrc(header, kIndexHeaderBytesV2, blob));
  return header;
}

Status ParseIndexFileHeader(std::string_view header, uint64_t file_size, const std::string& path,
                            IndexFileHeader* out) {
  if (header.size() < 12 || file_size < 12 || std::memcmp(header.data(), kMagic, 8) != 0) {
    return Status::Corruption("index file " + path + " has a bad header");
  }
  IndexFileHeader h;
  h.version = GetFixed<uint32_t>(header.data() + 8);
  if (h.version < kOldestReadableIndexFileVersion || h.version > kIndexFileVersion) {
    return Status::Corruption("index file " + path + " has format version " +
                              std::to_string(h.version) + ", this build reads " +
                              std::to_string(kOldestReadableIndexFileVersion) + " to " +
                              std::to_string(kIndexFileVersion));
  }
  h.header_bytes = h.version == 2 ? kIndexHeaderBytesV2 : kIndexHeaderBytes;
  if (header.size() < h.header_bytes || file_size < h.header_bytes) {
    return Status::Corruption("index file " + path + " has a bad header");
  }
  h.recall_bp = GetFixed<uint32_t>(header.data() + 12);
  h.sequence = GetFixed<uint64_t>(header.data() + 16);
  h.binding = GetFixed<uint64_t>(header.data() + 24);
  h.blob_bytes = GetFixed<uint64_t>(header.data() + 32);
  if (h.version >= 3) {
    h.coarse_recall_bp = GetFixed<uint32_t>(header.data() + 40);
    h.oversampling = GetFixed<uint32_t>(header.data() + 44);
  }
  h.crc = GetFixed<uint32_t>(header.data() + h.header_bytes - 4);
  if (h.blob_bytes != file_size - h.header_bytes) {
    return Status::Corruption("index file " + path + " is truncated or has trailing bytes (" +
                              std::to_string(file_size) + " bytes, header says " +
                              std::to_string(h.header_bytes) + " + " +
                              std::to_string(h.blob_bytes) + ")");
  }
  *out = h;
  return Status::OK();
}

Status CheckIndexFileBlob(std::string_view header, const IndexFileHeader& parsed,
                          std::string_view blob, uint64_t binding, const std::string& path) {
  if (header.size() < parsed.header_bytes || blob.size() != parsed.blob_bytes ||
      FileCrc(header, parsed.header_bytes, blob) != parsed.crc) {
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
