#include "tools/process_memory.h"

#include <cstdlib>
#include <cstring>
#include <initializer_list>

#ifdef __GLIBC__
#include <malloc.h>

#include <climits>
#endif

namespace hedgedb {
namespace cli {

bool KeepFreedMemoryForReuse() {
#ifdef __GLIBC__
  const char* choice = std::getenv("HEDGEDB_MALLOC");
  if (choice != nullptr && std::strcmp(choice, "glibc") == 0) return false;
  // A user's own tuning of glibc's malloc wins over ours.
  for (const char* name : {"MALLOC_MMAP_MAX_", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_",
                           "MALLOC_TOP_PAD_"}) {
    if (std::getenv(name) != nullptr) return false;
  }
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  if (tunables != nullptr && std::strstr(tunables, "glibc.malloc.") != nullptr) return false;
  // Every block from the heap (none mapped on its own), and the heap's top
  // kept up to 2 GiB free: both stop the fault-in of every step's pages.
  // Each setting also ends glibc's dynamic threshold.
  return mallopt(M_MMAP_MAX, 0) == 1 && mallopt(M_TRIM_THRESHOLD, INT_MAX) == 1;
#else
  return false;
#endif
}

}  // namespace cli
}  // namespace hedgedb
