// The header of a coarse index file (<collection>.hidx): magic "HEDGEIDX",
// version u32, tuned recall u32 (basis points; kUnknownRecall: not measured),
// sequence u64, binding u64, payload bytes u64, crc u32 (CRC32C over version
// .. payload bytes, then the payload); little-endian. The payload follows:
// in version 3 the upkeep record (u32 length, then IndexUpkeep's encoding),
// then the FAISS blob; in version 2 the FAISS blob alone.
// FAISS-free, so that the checks run (and are fuzzed) without FAISS.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <string>
#include <string_view>

#include "hedgedb/status.h"

namespace hedgedb {
namespace index {

// Version 2: FAISS IVF indexes hold the user ids themselves (version 1 wrapped
// them in an IndexIDMap whose removal corrupts them) and the header binds the
// file to its collection. Files of version 1 are rebuilt from the records.
// Version 3: the upkeep record rides in the same file, so that it always
// describes the index it is saved with (a crash leaves the old file or the
// new one, never one's index with the other's record). Files of version 2
// are read as they are, with no record (the upkeep starts from nothing).
inline constexpr uint32_t kIndexFileVersion = 3;
inline constexpr uint32_t kOldestIndexFileVersion = 2;
inline constexpr size_t kIndexHeaderBytes = 8 + 4 + 4 + 8 + 8 + 8 + 4;
inline constexpr uint32_t kUnknownRecall = 0xFFFFFFFFu;

struct IndexFileHeader {
  uint32_t version = kIndexFileVersion;
  uint32_t recall_bp = kUnknownRecall;
  uint64_t sequence = 0;
  uint64_t binding = 0;
  uint64_t blob_bytes = 0;  // the payload's
  uint32_t crc = 0;
};

// The header bytes for a payload made of `pieces` in order, as `version`
// (only tests and the fuzzer write older ones).
std::string EncodeIndexFileHeader(uint32_t recall_bp, uint64_t sequence, uint64_t binding,
                                  std::initializer_list<std::string_view> pieces,
                                  uint32_t version = kIndexFileVersion);
inline std::string EncodeIndexFileHeader(uint32_t recall_bp, uint64_t sequence, uint64_t binding,
                                         std::string_view payload,
                                         uint32_t version = kIndexFileVersion) {
  return EncodeIndexFileHeader(recall_bp, sequence, binding, {payload}, version);
}

// Parses the first kIndexHeaderBytes of a file of `file_size` bytes: magic,
// version, and the blob length against the file size (checked before anyone
// allocates what the header says). Corruption naming `path` otherwise.
Status ParseIndexFileHeader(std::string_view header, uint64_t file_size, const std::string& path,
                            IndexFileHeader* out);

// Checks the CRC over the header and `blob` (the payload) and that the file
// belongs to `binding`.
Status CheckIndexFileBlob(std::string_view header, const IndexFileHeader& parsed,
                          std::string_view blob, uint64_t binding, const std::string& path);

// The bytes of a version-3 payload ahead of the FAISS blob: `upkeep`'s length
// and `upkeep`.
std::string EncodeUpkeepPrefix(std::string_view upkeep);
// Splits a checked payload into the upkeep record ("" in a version-2 file)
// and the FAISS blob; Corruption naming `path` if the record's length runs
// past the payload.
Status SplitIndexPayload(const IndexFileHeader& parsed, std::string_view payload,
                         const std::string& path, std::string_view* upkeep, std::string_view* blob);

// How a collection has kept its index as items came and went
// (query/index_keeper.h), saved with the index it describes.
struct IndexUpkeep {
  int64_t changes_since_check = 0;  // vectors added or removed since the check
  uint64_t checked_sequence = 0;    // of the last check (0: none)
  int64_t checked_time = 0;         // Unix seconds
  double checked_recall = std::numeric_limits<double>::quiet_NaN();  // what it measured
  uint64_t retrained_sequence = 0;  // of the last retrain (0: none)
  int64_t retrained_time = 0;
  int64_t retrains = 0;
  int fitted_knob = 0;  // nprobe fitted when the index was trained (0: unknown)
  double fitted_recall = std::numeric_limits<double>::quiet_NaN();  // and its estimate
  std::string retrain_reason;
  std::string note;  // the last check's outcome
  // The collection's fit of its default search (query/knob_fit.h), beside
  // the header's final recall: stage 1's coarse recall at the default knobs
  // and the fitted candidates per result (0: none fitted).
  double coarse_recall = std::numeric_limits<double>::quiet_NaN();
  int oversampling = 0;
  // The IVF lists' imbalance (ImbalanceFactor, query/index_keeper.h) right
  // after the index was trained, the baseline a check compares with
  // (Options::index_retrain_imbalance), and at the last check. NaN: not
  // measured (not IVF, or a record of version 1).
  double fitted_imbalance = std::numeric_limits<double>::quiet_NaN();
  double checked_imbalance = std::numeric_limits<double>::quiet_NaN();
  // Live items when the default search was last fitted (0: unknown, a
  // record before version 3): an index without lists is fitted again once
  // the collection has grown well past it (IndexKeeper::Save).
  int64_t fitted_items = 0;
};

// IndexUpkeep's fields, in order (a field added to the struct stops
// EqualUpkeepFields compiling until it is counted and compared there).
inline constexpr int kIndexUpkeepFields = 16;
static_assert(kIndexUpkeepFields < 32, "EqualUpkeepFields: one bit per field");
// Which fields of `a` and `b` are equal: bit i for the i-th field in
// declaration order. Doubles compare as their bits (a NaN, "not measured",
// equals itself), as the record stores them.
uint32_t EqualUpkeepFields(const IndexUpkeep& a, const IndexUpkeep& b);
// Every field equal, as EqualUpkeepFields compares them: what the record's
// round trip keeps (tests/index/index_file_test.cc, the index_header
// fuzzer).
inline bool operator==(const IndexUpkeep& a, const IndexUpkeep& b) {
  return EqualUpkeepFields(a, b) == (uint32_t(1) << kIndexUpkeepFields) - 1;
}
inline bool operator!=(const IndexUpkeep& a, const IndexUpkeep& b) { return !(a == b); }

// Record version u32 (2), then the fields in order: integers as they are,
// doubles as IEEE bits, strings as u32 length + bytes. A reader takes the
// fields it knows and ignores bytes after them (a later version appends).
// Version 1 ended at oversampling: read, its imbalances are NaN (the next
// open measures the loaded index's as the baseline).
std::string EncodeIndexUpkeep(const IndexUpkeep& upkeep);
// Corruption (naming `path`) if the record is short or of version 0.
Status DecodeIndexUpkeep(std::string_view record, const std::string& path, IndexUpkeep* out);

}  // namespace index
}  // namespace hedgedb
