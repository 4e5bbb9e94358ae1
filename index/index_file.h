// The header of a coarse index file (<collection>.hidx): magic "HEDGEIDX",
// version u32, tuned recall u32 (basis points; kUnknownRecall: not measured),
// sequence u64, binding u64, blob bytes u64, crc u32 (CRC32C over version ..
// blob bytes, then the blob); little-endian. The FAISS blob follows.
// FAISS-free, so that the checks run (and are fuzzed) without FAISS.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "hedgedb/status.h"

namespace hedgedb {
namespace index {

// Version 2: FAISS IVF indexes hold the user ids themselves (version 1 wrapped
// them in an IndexIDMap whose removal corrupts them) and the header binds the
// file to its collection. Files of version 1 are rebuilt from the records.
inline constexpr uint32_t kIndexFileVersion = 2;
inline constexpr size_t kIndexHeaderBytes = 8 + 4 + 4 + 8 + 8 + 8 + 4;
inline constexpr uint32_t kUnknownRecall = 0xFFFFFFFFu;

struct IndexFileHeader {
  uint32_t version = kIndexFileVersion;
  uint32_t recall_bp = kUnknownRecall;
  uint64_t sequence = 0;
  uint64_t binding = 0;
  uint64_t blob_bytes = 0;
  uint32_t crc = 0;
};

// The header bytes for `blob`.
std::string EncodeIndexFileHeader(uint32_t recall_bp, uint64_t sequence, uint64_t binding,
                                  std::string_view blob);

// Parses the first kIndexHeaderBytes of a file of `file_size` bytes: magic,
// version, and the blob length against the file size (checked before anyone
// allocates what the header says). Corruption naming `path` otherwise.
Status ParseIndexFileHeader(std::string_view header, uint64_t file_size, const std::string& path,
                            IndexFileHeader* out);

// Checks the CRC over the header and `blob` and that the file belongs to
// `binding`.
Status CheckIndexFileBlob(std::string_view header, const IndexFileHeader& parsed,
                          std::string_view blob, uint64_t binding, const std::string& path);

}  // namespace index
}  // namespace hedgedb
