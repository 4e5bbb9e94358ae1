// SelectSmallest and SortSmall (index/select_k.h) against std::sort, on the
// records stage 1 keeps: (distance, id) pairs under a total order, with
// ties in distance, repeated pairs, infinities and sorted or reversed input.
#include "index/select_k.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

namespace hedgedb {
namespace index {
namespace {

struct Pair {
  float distance;
  int64_t id;
  bool operator==(const Pair& o) const { return distance == o.distance && id == o.id; }
};

struct Key {
  uint32_t operator()(const Pair& p) const { return FloatKey(p.distance); }
};

struct Less {
  bool operator()(const Pair& a, const Pair& b) const {
    return (a.distance < b.distance) | ((a.distance == b.distance) & (a.id < b.id));
  }
};

// Inputs of n pairs in several shapes: distinct, a few distance values (ties
// broken by id), all equal (repeated pairs), mostly the smallest pair
// repeated, infinities, sorted, reversed.
std::vector<std::vector<Pair>> Inputs(size_t n, std::mt19937* rng) {
  std::vector<std::vector<Pair>> out;
  std::uniform_real_distribution<float> u(0.0f, 100.0f);
  std::uniform_real_distribution<float> signed_u(-3.0f, 3.0f);
  std::uniform_int_distribution<int> few(0, 3);
  std::uniform_int_distribution<int64_t> id(-1, 40);
  std::vector<Pair> distinct, ties, equal, low, inf, mixed;
  for (size_t i = 0; i < n; ++i) {
    distinct.push_back({u(*rng), int64_t(i)});
    ties.push_back({float(few(*rng)), id(*rng)});
    equal.push_back({1.5f, 7});
    low.push_back(i % 4 ? Pair{0.0f, 0} : Pair{u(*rng), int64_t(i)});
    // Negative distances (inner products), signed zeros, and a spread of
    // magnitudes that puts most pairs in one bucket of the first radix step.
    const float zeros[] = {0.0f, -0.0f};
    mixed.push_back(
        {i % 7 == 0 ? zeros[i % 2] : (i % 5 ? signed_u(*rng) : 1e6f * u(*rng)), int64_t(i % 11)});
    inf.push_back({i % 3 ? std::numeric_limits<float>::infinity() : u(*rng), int64_t(i % 5)});
  }
  std::vector<Pair> sorted = distinct, reversed = distinct;
  std::sort(sorted.begin(), sorted.end(), Less());
  std::sort(reversed.begin(), reversed.end(),
            [](const Pair& a, const Pair& b) { return Less()(b, a); });
  return {distinct, ties, equal, low, inf, mixed, sorted, reversed};
}

TEST(SelectK, FloatKeyOrdersAsFloatsDo) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> ascending = {-inf,   -1e30f, -2.5f, -1e-30f, 0.0f,
                                        1e-40f, 1e-30f, 1.0f,  3e38f,   inf};
  for (size_t i = 0; i + 1 < ascending.size(); ++i) {
    EXPECT_LT(FloatKey(ascending[i]), FloatKey(ascending[i + 1])) << ascending[i];
  }
  EXPECT_EQ(FloatKey(-0.0f), FloatKey(0.0f));
}

TEST(SelectK, SortSmallEqualsStdSort) {
  std::mt19937 rng(1);
  for (size_t n : {0, 1, 2, 3, 15, 16, 17, 33, 100, 257, 600}) {
    for (std::vector<Pair> v : Inputs(n, &rng)) {
      std::vector<Pair> want = v;
      std::sort(want.begin(), want.end(), Less());
      SortSmall(v.data(), v.size(), Less());
      ASSERT_EQ(v, want) << "n " << n;
    }
  }
}

TEST(SelectK, SelectionsKeepTheKSmallestWithTheKthLast) {
  std::mt19937 rng(2);
  for (size_t n : {1, 2, 3, 16, 17, 40, 100, 257, 600}) {
    // Every k up to 100; beyond, a few.
    std::vector<size_t> ks;
    for (size_t k = 1; k <= n; ++k) {
      if (n <= 100 || k <= 3 || k % 37 == 0 || k + 3 > n) ks.push_back(k);
    }
    for (size_t k : ks) {
      for (std::vector<Pair> v : Inputs(n, &rng)) {
        std::vector<Pair> want = v;
        std::sort(want.begin(), want.end(), Less());
        std::vector<Pair> by_key = v;
        SelectSmallest(v.data(), v.size(), k, Less());
        SelectSmallestByKey(by_key.data(), by_key.size(), k, Key(), Less());
        // The k-th smallest sits at k - 1; the first k are the k smallest.
        ASSERT_EQ(v[k - 1], want[k - 1]) << "n " << n << " k " << k;
        std::vector<Pair> head(v.begin(), v.begin() + long(k));
        std::sort(head.begin(), head.end(), Less());
        ASSERT_EQ(head, std::vector<Pair>(want.begin(), want.begin() + long(k)))
            << "n " << n << " k " << k;
        // Nothing lost or made up: the whole is a permutation of the input.
        std::sort(v.begin(), v.end(), Less());
        ASSERT_EQ(v, want);
        // The same with the radix steps first.
        ASSERT_EQ(by_key[k - 1], want[k - 1]) << "by key, n " << n << " k " << k;
        head.assign(by_key.begin(), by_key.begin() + long(k));
        std::sort(head.begin(), head.end(), Less());
        ASSERT_EQ(head, std::vector<Pair>(want.begin(), want.begin() + long(k)))
            << "by key, n " << n << " k " << k;
      }
    }
  }
}

// Ordered and organ-pipe inputs, on which median-of-three pivots split
// badly pass after pass, stay O(n log n): counted in comparisons, not timed.
TEST(SelectK, OrderedInputsStayNLogN) {
  for (size_t n : {2000, 20000}) {
    std::vector<std::vector<Pair>> shapes(4);
    for (size_t i = 0; i < n; ++i) {
      shapes[0].push_back({float(n - i), int64_t(i)});                  // falling
      shapes[1].push_back({float(i), int64_t(i)});                      // rising
      shapes[2].push_back({float(i < n / 2 ? i : n - i), int64_t(i)});  // organ pipe
      shapes[3].push_back({1.0f, int64_t(n - i)});                      // equal, ids falling
    }
    double log2n = 0;
    for (size_t m = n; m > 1; m >>= 1) ++log2n;
    const double bound = 40.0 * double(n) * log2n;
    for (size_t s = 0; s < shapes.size(); ++s) {
      for (size_t k : {size_t(1), n / 2, n - 8, n}) {
        int64_t comparisons = 0;
        auto counting = [&comparisons](const Pair& a, const Pair& b) {
          ++comparisons;
          return Less()(a, b);
        };
        std::vector<Pair> v = shapes[s];
        SelectSmallest(v.data(), v.size(), k, counting);
        EXPECT_LT(double(comparisons), bound) << "select, shape " << s << " n " << n << " k " << k;
        std::vector<Pair> want = shapes[s];
        std::sort(want.begin(), want.end(), Less());
        EXPECT_EQ(v[k - 1], want[k - 1]);
      }
      int64_t comparisons = 0;
      auto counting = [&comparisons](const Pair& a, const Pair& b) {
        ++comparisons;
        return Less()(a, b);
      };
      std::vector<Pair> v = shapes[s];
      SortSmall(v.data(), v.size(), counting);
      EXPECT_LT(double(comparisons), bound) << "sort, shape " << s << " n " << n;
      EXPECT_TRUE(std::is_sorted(v.begin(), v.end(), Less()));
    }
  }
}

}  // namespace
}  // namespace index
}  // namespace hedgedb
