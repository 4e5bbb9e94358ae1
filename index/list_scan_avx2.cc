// L2SqrRows for AVX2 (list_scan_isa.h): the source of list_scan_impl.h
// compiled with the level's flags (cmake/hedgedb_simd.cmake), reached only
// through L2SqrRows' dispatch after the CPU check (common/simd_level.h).
#include <cstdint>

#include "index/list_scan_isa.h"

namespace hedgedb {
namespace index {
namespace avx2 {
#include "index/list_scan_impl.h"
}  // namespace avx2
}  // namespace index
}  // namespace hedgedb
