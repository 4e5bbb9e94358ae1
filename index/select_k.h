// Selecting and sorting a few hundred small records without data-dependent
// branches: stage 1's last step. A short list scan (a batched search probing
// two lists of 100 rows for 50 candidates) ends with an nth_element over a
// few hundred (distance, id) pairs and a sort of the kept ones. Their
// comparisons are coin flips to the branch predictor: std::nth_element and
// std::sort spent a sixth of such a search on mispredicted branches. Here a
// partition step swaps every element and advances the boundary by the
// comparison's result (Lomuto's scheme, branch-free), so the cost is a few
// instructions an element whatever the data.
//
// `less` must be a strict weak order that compiles to straight-line code
// (bitwise & and | of comparisons, not && and ||).
//
// Even branch-free, a partition pass costs several cycles an element (each
// swap's store feeds the next element's load), and a selection makes two or
// three of them. SelectSmallestByKey first narrows the range by radix steps
// on a 32-bit key that orders as `less` does (FloatKey for a float
// distance): a histogram of 256 buckets over [min key, max key], then one
// compaction pass keeping the buckets up to the one that holds the k-th.
// Each step is a few cycles an element with no dependency between
// elements, and usually leaves k plus a handful.
#ifndef HEDGEDB_INDEX_SELECT_K_H_
#define HEDGEDB_INDEX_SELECT_K_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <utility>

namespace hedgedb {
namespace index {
namespace select_detail {

// Ranges this short are finished by insertion sort.
constexpr size_t kShort = 16;

template <typename T, typename Less>
void InsertionSort(T* a, size_t n, Less less) {
  for (size_t i = 1; i < n; ++i) {
    const T x = a[i];
    size_t j = i;
    for (; j > 0 && less(x, a[j - 1]); --j) a[j] = a[j - 1];
    a[j] = x;
  }
}

// The median of a[0], a[n / 2], a[n - 1] (n >= 3), by value.
template <typename T, typename Less>
T MedianOfThree(const T* a, size_t n, Less less) {
  const T& x = a[0];
  const T& y = a[n / 2];
  const T& z = a[n - 1];
  if (less(x, y)) {
    if (less(y, z)) return y;
    return less(x, z) ? z : x;
  }
  if (less(x, z)) return x;
  return less(y, z) ? z : y;
}

// Reorders a[0, n) into [0, m) before `pivot` (keep(x) true) and [m, n) not,
// and returns m. Every element is swapped with the boundary's, which moves on
// by keep(x): each of [0, m) kept, each of [m, i) not.
template <typename T, typename Keep>
size_t Partition(T* a, size_t n, Keep keep) {
  size_t m = 0;
  for (size_t i = 0; i < n; ++i) {
    const T x = a[i];
    const bool k = keep(x);
    a[i] = a[m];
    a[m] = x;
    m += k ? 1 : 0;
  }
  return m;
}

// Splits a[lo, hi) around a pivot drawn from it: [lo, m1) less than the
// pivot and [m1, hi) not, where m1 > lo; or, where nothing is less (the
// pivot is the range's smallest, m1 == lo), [lo, m2) equal to it and
// [m2, hi) greater, where m2 > lo. Either way the parts shrink. *m2 is m1
// in the first case.
template <typename T, typename Less>
void Split(T* a, size_t lo, size_t hi, Less less, size_t* m1, size_t* m2) {
  const T pivot = MedianOfThree(a + lo, hi - lo, less);
  *m1 = lo + Partition(a + lo, hi - lo, [&](const T& x) { return less(x, pivot); });
  *m2 = *m1;
  if (*m1 == lo) {
    // Those not above the pivot: its equals (the pivot among them).
    *m2 = lo + Partition(a + lo, hi - lo, [&](const T& x) { return !less(pivot, x); });
  }
}

// Partition passes allowed along one path before the library takes over:
// twice the passes of a perfect split, plus a few. Median-of-three pivots on
// ordered input can take off only a few elements a pass (quadratic).
inline int PassBudget(size_t n) {
  int depth = 0;
  for (; n > 1; n >>= 1) ++depth;
  return 2 * depth + 4;
}

// SortSmall with `passes` partition passes left on this path.
template <typename T, typename Less>
void SortWithin(T* a, size_t n, Less less, int passes) {
  while (n > select_detail::kShort) {
    if (passes-- == 0) {
      std::sort(a, a + n, less);  // as in SelectSmallest: introsort bounds the rest
      return;
    }
    size_t m1, m2;
    Split(a, 0, n, less, &m1, &m2);
    // [0, m1) and [m2, n) are left to sort ([m1, m2): equals, in place).
    // Recurse into the shorter side, loop on the longer: O(log n) depth.
    if (m1 < n - m2) {
      SortWithin(a, m1, less, passes);
      a += m2;
      n -= m2;
    } else {
      SortWithin(a + m2, n - m2, less, passes);
      n = m1;
    }
  }
  select_detail::InsertionSort(a, n, less);
}

}  // namespace select_detail

// Moves the k smallest of a[0, n) to a[0, k) in no particular order, with
// a[k - 1] the k-th smallest (as std::nth_element at k - 1). 0 < k <= n.
template <typename T, typename Less>
void SelectSmallest(T* a, size_t n, size_t k, Less less) {
  size_t lo = 0, hi = n;
  const size_t target = k - 1;
  int passes = select_detail::PassBudget(n);
  while (hi - lo > select_detail::kShort) {
    if (passes-- == 0) {
      // Pivots that keep failing (ordered or organ-pipe input): the
      // library's introselect bounds the rest at O(n log n).
      std::nth_element(a + lo, a + target, a + hi, less);
      return;
    }
    size_t m1, m2;
    select_detail::Split(a, lo, hi, less, &m1, &m2);
    if (m2 > m1) {
      if (target < m2) return;  // the k-th equals the range's smallest
      lo = m2;
    } else if (target < m1) {
      hi = m1;
    } else {
      lo = m1;
    }
  }
  select_detail::InsertionSort(a + lo, hi - lo, less);
}

// Sorts a[0, n) (quicksort on the same partition; not stable, but equal
// elements under a total order are indistinguishable).
template <typename T, typename Less>
void SortSmall(T* a, size_t n, Less less) {
  select_detail::SortWithin(a, n, less, select_detail::PassBudget(n));
}

// A key whose unsigned order is the order of the float f: negative floats
// have every bit flipped, others the sign bit. -0 counts as +0 (as `==`
// does). Not for NaN.
inline uint32_t FloatKey(float f) {
  f += 0.0f;  // -0 + 0 = +0
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  return bits ^ (uint32_t(int32_t(bits) >> 31) | 0x80000000u);
}

// As SelectSmallest, first narrowed by radix steps on key(x), a uint32_t
// with less(x, y) => key(x) <= key(y).
template <typename T, typename Key, typename Less>
void SelectSmallestByKey(T* a, size_t n, size_t k, Key key, Less less) {
  while (n > k + select_detail::kShort) {
    uint32_t lo = UINT32_MAX, hi = 0;
    for (size_t i = 0; i < n; ++i) {
      const uint32_t x = key(a[i]);
      lo = std::min(lo, x);
      hi = std::max(hi, x);
    }
    if (lo == hi) break;
    // 256 buckets of 2^shift keys from lo up cover [lo, hi].
    const int width = 32 - __builtin_clz(hi - lo);
    const int shift = std::max(0, width - 8);
    uint32_t count[256] = {};
    for (size_t i = 0; i < n; ++i) ++count[(key(a[i]) - lo) >> shift];
    // b: the bucket holding the k-th smallest.
    uint32_t b = 0;
    size_t below = 0;
    while (below + count[b] < k) below += count[b++];
    // Keep the buckets up to b, in order (the writes never pass the reads).
    size_t m = 0;
    for (size_t i = 0; i < n; ++i) {
      const T x = a[i];
      a[m] = x;
      m += ((key(x) - lo) >> shift) <= b ? 1 : 0;
    }
    if (m == n) break;  // the k-th is in the top bucket: no narrowing
    n = m;
  }
  SelectSmallest(a, n, k, less);
}

}  // namespace index
}  // namespace hedgedb

#endif  // HEDGEDB_INDEX_SELECT_K_H_
