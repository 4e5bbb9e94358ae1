#include "tools/process_memory.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

#ifdef __GLIBC__
#include <malloc.h>

#include <climits>
#endif

namespace hedgedb {
namespace cli {

bool MallocTunedByUser() {
  for (const char* name : kGlibcMallocVariables) {
    if (std::getenv(name) != nullptr) return true;
  }
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  return tunables != nullptr && std::strstr(tunables, "glibc.malloc.") != nullptr;
}

bool KeepFreedMemoryForReuse() {
#ifdef __GLIBC__
  const char* choice = std::getenv("HEDGEDB_MALLOC");
  if (choice != nullptr && std::strcmp(choice, "glibc") == 0) return false;
  if (choice != nullptr && *choice != '\0') {
    std::fprintf(stderr, "hedgedb: warning: HEDGEDB_MALLOC=%s ignored (the one value is 'glibc')\n",
                 choice);
  }
  if (MallocTunedByUser()) return false;  // the user's own tuning wins over ours
  // No block of the main arena mapped on its own, and the heap's top kept
  // up to INT_MAX bytes free (setting the trim threshold also ends glibc's
  // self-adjusting of it).
  return mallopt(M_MMAP_MAX, 0) == 1 && mallopt(M_TRIM_THRESHOLD, INT_MAX) == 1;
#else
  return false;
#endif
}

}  // namespace cli
}  // namespace hedgedb
