// HEDGEDB_EXPORT marks the public API: the shared library is built with
// hidden visibility and exports only what carries this mark.
#pragma once

#define HEDGEDB_EXPORT __attribute__((visibility("default")))
