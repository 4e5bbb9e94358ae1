// The coarse index file header (index/index_file.cc): magic, version (2 and
// 3, whose headers differ in length), the blob length against the file size,
// the checksum and the binding. FAISS's own reader is not fuzzed here. Input: byte 0 bit 0 = fix
// the checksum first, byte 0 bit 1 = expect the file's own binding, then the file.
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
    // Rewrite the header for the actual blob so the later checks are reached
    // (the input's version says how long the header is).
    const bool v2 = GetFixed<uint32_t>(file.data() + 8) == 2;
    const size_t bytes = v2 ? kIndexHeaderBytesV2 : kIndexHeaderBytes;
    IndexFileHeader f;
    f.binding = GetFixed<uint64_t>(file.data() + 24);
    f.sequence = GetFixed<uint64_t>(file.data() + 16);
    f.recall_bp = GetFixed<uint32_t>(file.data() + 12);
    f.coarse_recall_bp = GetFixed<uint32_t>(file.data() + 40);
    f.oversampling = GetFixed<uint32_t>(file.data() + 44);
    const std::string blob = file.substr(bytes);
    std::string header = v2 ? EncodeIndexFileHeaderV2(f.recall_bp, f.sequence, f.binding, blob)
                            : EncodeIndexFileHeader(f, blob);
    std::memcpy(&header[0], file.data(), 8);      // keep the input's magic
    std::memcpy(&header[8], file.data() + 8, 4);  // and version
    file = header + blob;
    uint32_t crc = Crc32c(file.data() + 8, bytes - 12);
    crc = Crc32c(blob.data(), blob.size(), crc);
    std::string le;
    PutFixed<uint32_t>(&le, crc);
    file.replace(bytes - 4, 4, le);
  }
  IndexFileHeader parsed;
  if (!ParseIndexFileHeader(file, file.size(), "fuzz.hidx", &parsed).ok()) return 0;
  if (parsed.blob_bytes + parsed.header_bytes != file.size()) __builtin_trap();
  const std::string_view header(file.data(), parsed.header_bytes);
  const std::string_view blob(file.data() + parsed.header_bytes, file.size() - parsed.header_bytes);
  const uint64_t binding = (mode & 2) ? parsed.binding : 42;
  const Status s = CheckIndexFileBlob(header, parsed, blob, binding, "fuzz.hidx");
  const std::string rewritten =
      parsed.version == 2
          ? EncodeIndexFileHeaderV2(parsed.recall_bp, parsed.sequence, parsed.binding, blob)
          : EncodeIndexFileHeader(parsed, blob);
  if (s.ok() && rewritten != header) {
    __builtin_trap();  // accepted a header its writer would not produce
  }
  return 0;
}
