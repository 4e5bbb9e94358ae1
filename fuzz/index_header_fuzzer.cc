// The coarse index file header (index/index_file.cc): magic, version, the blob
// length against the file size, the checksum and the binding; then the
// payload's upkeep record (version 3). FAISS's own
// reader is not fuzzed here. Input: byte 0 bit 0 = fix the checksum first,
// byte 0 bit 1 = expect the file's own binding, then the file.
#include <cstring>
#include <string>

#include "common/coding.h"
#include "common/crc32c.h"
#include "index/index_file.h"

using namespace hedgedb;
using namespace hedgedb::index;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t mode = data[0];
  std::string file(reinterpret_cast<const char*>(data + 1), size - 1);
  if ((mode & 1) && file.size() >= kIndexHeaderBytes) {
    // Rewrite the header for the actual blob so the later checks are reached.
    const uint64_t binding = GetFixed<uint64_t>(file.data() + 24);
    const uint64_t sequence = GetFixed<uint64_t>(file.data() + 16);
    const uint32_t recall = GetFixed<uint32_t>(file.data() + 12);
    const std::string blob = file.substr(kIndexHeaderBytes);
    std::string header = EncodeIndexFileHeader(recall, sequence, binding, blob);
    std::memcpy(&header[0], file.data(), 8);      // keep the input's magic
    std::memcpy(&header[8], file.data() + 8, 4);  // and version
    file = header + blob;
    uint32_t crc = Crc32c(file.data() + 8, kIndexHeaderBytes - 12);
    crc = Crc32c(blob.data(), blob.size(), crc);
    std::string le;
    PutFixed<uint32_t>(&le, crc);
    file.replace(kIndexHeaderBytes - 4, 4, le);
  }
  const std::string_view header(file.data(), std::min(file.size(), kIndexHeaderBytes));
  IndexFileHeader parsed;
  if (!ParseIndexFileHeader(header, file.size(), "fuzz.hidx", &parsed).ok()) return 0;
  if (parsed.blob_bytes + kIndexHeaderBytes != file.size()) __builtin_trap();
  const std::string_view blob(file.data() + kIndexHeaderBytes, file.size() - kIndexHeaderBytes);
  const uint64_t binding = (mode & 2) ? parsed.binding : 42;
  const Status s = CheckIndexFileBlob(header, parsed, blob, binding, "fuzz.hidx");
  if (s.ok() && EncodeIndexFileHeader(parsed.recall_bp, parsed.sequence, parsed.binding, blob,
                                      parsed.version) != header) {
    __builtin_trap();  // accepted a header its writer would not produce
  }
  if (!s.ok()) return 0;
  // The payload: the upkeep record (version 3), then the FAISS blob.
  std::string_view record, faiss_blob;
  if (!SplitIndexPayload(parsed, blob, "fuzz.hidx", &record, &faiss_blob).ok()) return 0;
  if (record.size() + faiss_blob.size() > blob.size()) __builtin_trap();
  IndexUpkeep upkeep;
  if (DecodeIndexUpkeep(record, "fuzz.hidx", &upkeep).ok()) {
    // What the writer encodes from what was read decodes to the same, in
    // every field (operator==, index/index_file.h).
    IndexUpkeep again;
    if (!DecodeIndexUpkeep(EncodeIndexUpkeep(upkeep), "fuzz.hidx", &again).ok() ||
        again != upkeep) {
      __builtin_trap();
    }
  }
  return 0;
}
