// The header of a coarse index file (<collection>.hidx): magic "HEDGEIDX",
// version u32, recall u32 (the fitted final recall@k estimate, basis points;
// kUnknownRecall: not measured), sequence u64, binding u64, blob bytes u64,
// coarse recall u32 (stage 1's, basis points), oversampling u32 (fitted
// candidates per result; 0: none), crc u32 (CRC32C over version .. oversampling,
// then the blob); little-endian. The FAISS blob follows. Version 2 had no
// coarse recall and oversampling (its crc follows blob bytes) and its recall
// was stage 1's coarse recall: still read.
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
// Version 3: the fitted default candidates (oversampling) and both recalls:
// the final one the fit targets and stage 1's, which the upkeep watches.
inline constexpr uint32_t kIndexFileVersion = 3;
inline constexpr uint32_t kOldestReadableIndexFileVersion = 2;
inline constexpr size_t kIndexHeaderBytesV2 = 8 + 4 + 4 + 8 + 8 + 8 + 4;
inline constexpr size_t kIndexHeaderBytes = kIndexHeaderBytesV2 + 4 + 4;
inline constexpr uint32_t kUnknownRecall = 0xFFFFFFFFu;

struct IndexFileHeader {
  uint32_t version = kIndexFileVersion;
  uint32_t recall_bp = kUnknownRecall;
  uint64_t sequence = 0;
  uint64_t binding = 0;
  uint64_t blob_bytes = 0;
  uint32_t coarse_recall_bp = kUnknownRecall;  // version 2: unknown
  uint32_t oversampling = 0;                   // version 2: 0
  uint32_t crc = 0;
  size_t header_bytes = kIndexHeaderBytes;  // of the version (parsed)
};

// The header bytes (this version) for `blob` with the recalls, oversampling,
// sequence and binding of `fields`.
std::string EncodeIndexFileHeader(const IndexFileHeader& fields, std::string_view blob);
// The same with no coarse recall and no oversampling.
std::string EncodeIndexFileHeader(uint32_t recall_bp, uint64_t sequence, uint64_t binding,
                                  std::string_view blob);
// A version 2 header, as builds before version 3 wrote it: for tests that
// old files still open.
std::string EncodeIndexFileHeaderV2(uint32_t recall_bp, uint64_t sequence, uint64_t binding,
                                    std::string_view blob);

// Parses the header at the start of a file of `file_size` bytes (`header`
// holds at least the first kIndexHeaderBytes, or the whole file if
// shorter): magic, version, and the blob length against the file size
// (checked before anyone allocates what the header says). Corruption naming
// `path` otherwise.
Status ParseIndexFileHeader(std::string_view header, uint64_t file_size, const std::string& path,
                            IndexFileHeader* out);

// Checks the CRC over the header and `blob` and that the file belongs to
// `binding`.
Status CheckIndexFileBlob(std::string_view header, const IndexFileHeader& parsed,
                          std::string_view blob, uint64_t binding, const std::string& path);

}  // namespace index
}  // namespace hedgedb
