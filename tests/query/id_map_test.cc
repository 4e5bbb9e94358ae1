// IdMap (query/id_map.h) against std::unordered_map under a long random mix
// of sets, inserts, erases and lookups, on the id patterns collections see:
// counting up from 0, sparse 64-bit, negative, and multiples of a large power
// of two (which a hash that keeps low bits would pile into one slot).
#include "query/id_map.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <unordered_map>
#include <vector>

namespace hedgedb {
namespace query {
namespace {

void CheckAgainstStd(const std::vector<int64_t>& universe, uint64_t seed, int ops) {
  IdMap map;
  std::unordered_map<int64_t, int64_t> want;
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<size_t> pick(0, universe.size() - 1);
  for (int i = 0; i < ops; ++i) {
    const int64_t id = universe[pick(rng)];
    const int64_t row = int64_t(rng() % 1000000);
    switch (rng() % 4) {
      case 0: {
        const bool fresh = want.find(id) == want.end();
        ASSERT_EQ(map.Set(id, row), fresh) << "op " << i;
        want[id] = row;
        break;
      }
      case 1: {
        const bool fresh = want.emplace(id, row).second;
        ASSERT_EQ(map.Insert(id, row), fresh) << "op " << i;
        break;
      }
      case 2:
        ASSERT_EQ(map.Erase(id), want.erase(id) == 1) << "op " << i;
        break;
      default: {
        auto it = want.find(id);
        ASSERT_EQ(map.Find(id), it == want.end() ? -1 : it->second) << "op " << i;
        ASSERT_EQ(map.Contains(id), it != want.end());
      }
    }
    ASSERT_EQ(map.size(), want.size());
  }
  // Every id of the universe, present or not, reads as the reference says.
  for (int64_t id : universe) {
    auto it = want.find(id);
    ASSERT_EQ(map.Find(id), it == want.end() ? -1 : it->second) << "id " << id;
  }
  map.Clear();
  EXPECT_EQ(map.size(), 0u);
  EXPECT_EQ(map.Find(universe.front()), -1);
}

TEST(IdMap, AgreesWithUnorderedMapOnEveryIdPattern) {
  std::vector<int64_t> dense, sparse, negative, strided;
  std::mt19937_64 rng(1);
  for (int64_t i = 0; i < 3000; ++i) {
    dense.push_back(i);
    sparse.push_back(int64_t(rng()));
    negative.push_back(-i - 1);
    strided.push_back(i << 20);
  }
  CheckAgainstStd(dense, 2, 60000);
  CheckAgainstStd(sparse, 3, 60000);
  CheckAgainstStd(negative, 4, 60000);
  CheckAgainstStd(strided, 5, 60000);
  std::vector<int64_t> mixed = dense;
  mixed.insert(mixed.end(), negative.begin(), negative.end());
  mixed.push_back(INT64_MIN);
  mixed.push_back(INT64_MAX);
  CheckAgainstStd(mixed, 6, 60000);
}

TEST(IdMap, ErasingEveryOtherIdKeepsTheRestFindable) {
  // Backward-shift deletion moves entries of a probe run: after erasing half
  // of a dense range in an order that cuts runs, the rest are all found.
  IdMap map;
  map.Reserve(10);  // small, then grown by the Sets: several rehashes
  for (int64_t id = 0; id < 5000; ++id) ASSERT_TRUE(map.Set(id, 2 * id));
  for (int64_t id = 4999; id >= 0; id -= 2) ASSERT_TRUE(map.Erase(id));
  EXPECT_EQ(map.size(), 2500u);
  for (int64_t id = 0; id < 5000; ++id) {
    EXPECT_EQ(map.Find(id), id % 2 == 0 ? 2 * id : -1) << id;
  }
  EXPECT_FALSE(map.Erase(1));
  EXPECT_FALSE(map.Insert(0, 7));
  EXPECT_EQ(map.Find(0), 0);
}

// The load factor bounds the map's memory: up to 3/4 full before it grows
// (16-byte slots: 21 to 43 bytes per id). 311,470 ids, the real-embedding
// collection of bench/RESULTS.md "Compact rows", fit 2^19 slots (at 1/2 they
// took 2^20, 54 bytes per id), and the map is still right when that full.
TEST(IdMap, GrowsOnlyPastThreeQuartersFull) {
  IdMap map;
  map.Reserve(311470);
  EXPECT_EQ(map.capacity(), size_t(1) << 19);
  const int64_t full = int64_t(3 * (size_t(1) << 19) / 4);
  for (int64_t id = 0; id < full; ++id) ASSERT_TRUE(map.Insert(id * 7919, id));
  EXPECT_EQ(map.capacity(), size_t(1) << 19);
  for (int64_t id = 0; id < full; ++id) ASSERT_EQ(map.Find(id * 7919), id) << id;
  EXPECT_EQ(map.Find(-7919), -1);
  ASSERT_TRUE(map.Insert(full * 7919, full));
  EXPECT_EQ(map.capacity(), size_t(1) << 20);
  for (int64_t id = 0; id <= full; ++id) ASSERT_EQ(map.Find(id * 7919), id) << id;
}

}  // namespace
}  // namespace query
}  // namespace hedgedb
