// How a `hedgedb` process that runs a network manages glibc's heap: the
// commands of the encoder module (train, embed, evaluate, the image
// commands) keep the blocks they free for their next allocations.
#pragma once

namespace hedgedb {
namespace cli {

// Keeps freed memory in the process for reuse: no block is served by its
// own mapping, and the heap's top is not given back. glibc otherwise maps
// every block above its mmap threshold (128 KiB, rising with use to at most
// 32 MiB) afresh and unmaps it at free, so a training step, which allocates
// and frees the same activations every iteration (25 MiB for one layer of
// the hib-ndigit CNN at batch 128), faults in all their pages again: 14% of
// its time went to the kernel, and train ran 1.17-1.20x the items per second
// with this (bench/train_malloc.py; the trained weights are bit for bit the
// same). The cost: the process keeps its peak heap until it ends, which a
// command that runs once and exits can afford.
//
// Leaves malloc as it is, and returns false, where the environment sets
// HEDGEDB_MALLOC=glibc or any of glibc's own tunings (MALLOC_MMAP_MAX_,
// MALLOC_MMAP_THRESHOLD_, MALLOC_TRIM_THRESHOLD_, MALLOC_TOP_PAD_,
// glibc.malloc.* in GLIBC_TUNABLES), or where the C library is not glibc. Process-wide: for a
// program's own main, never for a library (the library leaves its host's
// allocator alone).
bool KeepFreedMemoryForReuse();

}  // namespace cli
}  // namespace hedgedb
