// Whole-file reads and the one atomic file write of the project (index files,
// model files, .npy outputs, caches): a file is either its old content or its
// complete new content, also after a crash or power loss.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

#include "hedgedb/status.h"

namespace hedgedb {

// Writes the concatenation of `parts` to `path`: to `path`.tmp.<pid>, fsync,
// rename over `path`, fsync of the directory (so the rename is durable too).
// On error the temporary file is removed and `path` is untouched.
Status WriteFileAtomically(const std::string& path, std::initializer_list<std::string_view> parts);

// Reads the whole regular file at `path` into *out. A file larger than
// `max_bytes` is an error, checked before anything is allocated.
Status ReadWholeFile(const std::string& path, std::string* out,
                     uint64_t max_bytes = uint64_t(1) << 40);

}  // namespace hedgedb
