// IdMap: a collection's live item ids -> their rows in the row table.
//
// Every search looks up each stage-1 candidate here, so the lookup is on the
// hot path: std::unordered_map took 14% of a one-query search over 100,000
// Gaussians (a node per entry, a division by a prime per hash, two or three
// cache misses per lookup; bench/RESULTS.md, "Against the practitioner's
// pipeline"). This is open addressing with linear probing over one array of
// (id, row) pairs: Fibonacci hashing spreads the usual ids (counting up from
// 0), a lookup reads one or two neighbouring slots, and erasing shifts the
// following entries back (no tombstones), so lookups stay short under churn.
// Load factor at most 3/4 (3/8 just after growing): 21 to 43 bytes per id
// (unordered_map: about 48 with its node, allocation and bucket). At 1/2 the
// map was a fifth of a compact collection's serving memory (54 of 302 bytes
// per item at 311,470 ids, bench/RESULTS.md "Compact rows"); linear probing
// at 3/4 reads 2.5 slots per found id on average (Knuth), 40 bytes, mostly
// one cache line (an id that is not there, as Insert of a new id finds, 8.5),
// and Fibonacci hashing of ids counting up spreads them nearly evenly, which
// keeps the runs shorter than those bounds.
// Not thread-safe for writes; concurrent Finds are fine.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace hedgedb {
namespace query {

class IdMap {
 public:
  IdMap() = default;

  // The row of `id`, or -1.
  int64_t Find(int64_t id) const {
    if (size_ == 0) return -1;
    for (size_t i = Home(id);; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.row < 0) return -1;
      if (s.id == id) return s.row;
    }
  }
  // Asks for the cache line of id's home slot ahead of a Find (a lookup of a
  // stage-1 candidate is a cache miss: a search's lookups wait on memory one
  // after another without it). Always inlined: GCC 12 takes a function whose
  // only effect is a prefetch for a pure one and deletes every call to it
  // that it did not inline early (the first version had no prefetch in the
  // binary; at -O2 none survived).
  __attribute__((always_inline)) void Prefetch(int64_t id) const {
    __builtin_prefetch(slots_.data() + (size_ != 0 ? Home(id) : 0));
  }
  bool Contains(int64_t id) const { return Find(id) >= 0; }
  // Maps id to row (row >= 0), replacing a previous row. Returns false if the
  // id was there already (its row is replaced all the same).
  bool Set(int64_t id, int64_t row);
  // Maps id to row only if the id is not there; returns whether it inserted.
  bool Insert(int64_t id, int64_t row);
  // Removes id; returns whether it was there.
  bool Erase(int64_t id);
  // Room for n ids without growing.
  void Reserve(size_t n);
  void Clear();
  size_t size() const { return size_; }
  // Slots (a power of two, 16 bytes each).
  size_t capacity() const { return slots_.size(); }

 private:
  struct Slot {
    int64_t id = 0;
    int64_t row = -1;  // -1: empty
  };
  // Whether `capacity` slots hold n ids within the load factor.
  static bool Fits(size_t n, size_t capacity) { return 4 * n <= 3 * capacity; }
  size_t Home(int64_t id) const {
    return size_t((uint64_t(id) * 0x9e3779b97f4a7c15ull) >> shift_) & mask_;
  }
  // The slot holding id, or the empty slot where it would go.
  size_t Probe(int64_t id) const;
  void Rehash(size_t capacity);

  std::vector<Slot> slots_;
  size_t mask_ = 0;
  int shift_ = 64;
  size_t size_ = 0;
};

}  // namespace query
}  // namespace hedgedb
