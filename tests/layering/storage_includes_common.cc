// Compiled as a file of the storage layer, with its include path
// (tests/CMakeLists.txt): storage may include common/ and itself, so this
// builds. Layering.StorageIncludingCommonBuilds; it keeps
// Layering.StorageIncludingQueryFailsToBuild from passing for another reason
// (a probe that cannot compile at all).
#include <cstddef>
#include <cstdint>

#include "common/crc32c.h"
#include "storage/record_store.h"

namespace hedgedb {

uint32_t LayeringProbeChecksum(const char* data, size_t n) { return Crc32c(data, n); }

}  // namespace hedgedb
