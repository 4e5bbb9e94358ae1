// How a `hedgedb` process that runs a network manages glibc's heap: the
// commands of the encoder module (train, embed, evaluate, the image
// commands) keep the blocks they free for their next allocations.
#pragma once

#include <cstddef>

namespace hedgedb {
namespace cli {

// The largest mmap threshold glibc accepts on 64-bit (half its 64 MiB
// arena heap): blocks above it are still mapped on their own, and given
// back to the system when freed.
constexpr size_t kMaxMmapThreshold = size_t(32) << 20;

// Keeps freed memory in the process for reuse: blocks up to
// kMaxMmapThreshold come from the heap, and the heap's top is not given
// back. Under glibc's defaults a training step gave its memory back and
// faulted it in again at every iteration: the heap's top is trimmed
// whenever more than twice the largest block freed so far is free there
// (its self-adjusting trim threshold, about 50 MiB behind a 25 MiB layer of
// the hib-ndigit CNN at batch 128), and a step frees all its activations.
// 15% of train's time went to the kernel; with this setting train runs
// 1.16-1.46x the items per second on one torch thread (bench/train_malloc.py;
// the trained weights are bit for bit the same). The cost: the process keeps
// the peak of its heap (up to INT_MAX bytes free at its top) until it ends,
// which a command that runs once and exits can afford.
//
// Leaves malloc as it is, and returns false, where HEDGEDB_MALLOC=glibc,
// where MallocTunedByUser(), or where the C library is not glibc (another
// value of HEDGEDB_MALLOC is ignored with a warning on stderr).
// Process-wide: for a program's own main, never for a library (the library
// leaves its host's allocator alone).
bool KeepFreedMemoryForReuse();

// The environment variables of glibc's malloc that MallocTunedByUser()
// honours (glibc reads them at start-up; GLIBC_TUNABLES is checked apart,
// for its glibc.malloc.* entries).
inline constexpr const char* kGlibcMallocVariables[] = {
    "MALLOC_MMAP_MAX_", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_"};

// Whether the environment tunes glibc's malloc itself: one of
// kGlibcMallocVariables, or glibc.malloc.* in GLIBC_TUNABLES.
bool MallocTunedByUser();

}  // namespace cli
}  // namespace hedgedb
