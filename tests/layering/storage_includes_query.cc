// Compiled as a file of the storage layer, with its include path
// (tests/CMakeLists.txt): query/ is above storage, so the second include is
// "No such file" and this does not build.
// Layering.StorageIncludingQueryFailsToBuild expects that error.
#include "common/crc32c.h"  // found: the storage view holds common/
#include "query/collection.h"
