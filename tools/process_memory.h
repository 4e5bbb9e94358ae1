// How a `hedgedb` process that runs a network manages glibc's heap: the
// commands of the encoder module (train, embed, evaluate, the image
// commands) keep the blocks they free for their next allocations.
#pragma once

#include <cstddef>

namespace hedgedb {
namespace cli {

// Keeps freed memory in the process for reuse: every block of the main
// arena comes from the heap (no block is mapped on its own: M_MMAP_MAX 0),
// and the heap's top is not given back. Under glibc's defaults a training
// step gave its memory back and faulted it in again at every iteration: the
// heap's top is trimmed whenever more than twice the largest block freed so
// far is free there (its self-adjusting trim threshold, about 50 MiB behind
// a 25 MiB layer of the hib-ndigit CNN at batch 128), a step frees all its
// activations, and a block above the mmap threshold (at most 32 MiB, half
// an arena's heap) is mapped and unmapped on every use: SPE's and PN's
// episodes of 700 items have 134 MiB layers. 15% of a batch-128 training's
// time and half of an episodic one's went to the kernel; with this setting
// train runs 1.16-1.46x the items per second at batch 128 and 1.9-2.0x with
// episodes of 700, on one torch thread (bench/train_malloc.py; the trained
// weights are bit for bit the same). The cost: the process keeps the peak of
// its heap until it ends (up to INT_MAX bytes free at its top; an episodic
// training's peak resident memory grew from 719 to 1,374 MiB, a batch-128
// one's by 1-6%), which a command that runs once and exits can afford. Threads' own arenas still
// map what does not fit in their 64 MiB heaps (glibc falls back to a mapping there).
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
