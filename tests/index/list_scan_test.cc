// hedgedb's stage-1 list scan (index/list_scan.h) against a brute-force
// scalar reference written here (every probed vector scored in sequential
// float arithmetic, sorted by (distance, id)) and against FAISS's own search
// of the same index, at every SIMD level, on odd dimensions and list sizes
// off the scan's tiles.
#include "index/list_scan.h"

#include <faiss/IndexFlat.h>
#include <faiss/IndexIDMap.h>
#include <faiss/IndexIVFFlat.h>
#include <faiss/IndexScalarQuantizer.h>
#include <faiss/impl/IDSelector.h>
#include <faiss/utils/fp16.h>
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <stdexcept>
#include <tuple>
#include <utility>
#include <vector>

#include "tests/kernel_isas.h"

namespace hedgedb {
namespace index {
namespace {

using testing_util::KernelIsaParamName;
using testing_util::ScopedKernelIsa;
using testing_util::SupportedKernelIsas;

std::vector<float> Normal(int64_t count, uint64_t seed, float scale = 1.0f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> v(static_cast<size_t>(count));
  for (float& x : v) x = normal(rng);
  return v;
}

// Float sums of d squares in another order differ by at most about
// d * eps * (the sum): 2e-5 relative covers d <= 130 with room.
constexpr float kRelTol = 2e-5f;

class EvenIds : public IdFilter {
 public:
  bool Allows(int64_t id) const override { return id % 2 == 0; }
};

// The reference: each query's nprobe nearest lists (reference distances to
// the centroids, ties to the smaller list), every vector in them that the
// filter allows, the k smallest (distance, id).
void BruteForce(const faiss::IndexIVFFlat& ivf, const float* x, int64_t nq, int64_t k, int nprobe,
                const IdFilter* filter, std::vector<float>* distances,
                std::vector<int64_t>* labels) {
  const int d = int(ivf.d);
  const auto* quantizer = static_cast<const faiss::IndexFlat*>(ivf.quantizer);
  const int64_t nlist = int64_t(ivf.nlist);
  distances->assign(size_t(nq * k), std::numeric_limits<float>::infinity());
  labels->assign(size_t(nq * k), -1);
  for (int64_t q = 0; q < nq; ++q) {
    std::vector<float> cd(static_cast<size_t>(nlist));
    reference::L2SqrRows(x + q * d, quantizer->get_xb(), nlist, d, cd.data());
    std::vector<std::pair<float, int64_t>> lists;
    for (int64_t l = 0; l < nlist; ++l) lists.emplace_back(cd[size_t(l)], l);
    std::sort(lists.begin(), lists.end());
    std::vector<std::pair<float, int64_t>> all;
    for (int64_t j = 0; j < std::min<int64_t>(nprobe, nlist); ++j) {
      const size_t l = size_t(lists[size_t(j)].second);
      const int64_t n = int64_t(ivf.invlists->list_size(l));
      const auto* v = reinterpret_cast<const float*>(ivf.invlists->get_codes(l));
      const int64_t* ids = ivf.invlists->get_ids(l);
      std::vector<float> dist(static_cast<size_t>(n));
      reference::L2SqrRows(x + q * d, v, n, d, dist.data());
      for (int64_t i = 0; i < n; ++i) {
        if (filter == nullptr || filter->Allows(ids[i])) all.emplace_back(dist[size_t(i)], ids[i]);
      }
    }
    std::sort(all.begin(), all.end());
    for (int64_t j = 0; j < std::min<int64_t>(k, int64_t(all.size())); ++j) {
      (*distances)[size_t(q * k + j)] = all[size_t(j)].first;
      (*labels)[size_t(q * k + j)] = all[size_t(j)].second;
    }
  }
}

// got equals want up to rounding: distances within kRelTol, and the same id
// wherever the wanted distance is not within the tolerance of a neighbour's
// (a near-tie may swap or exchange ids at the boundary).
void ExpectSameUpToRounding(const std::vector<float>& want_d, const std::vector<int64_t>& want,
                            const std::vector<float>& got_d, const std::vector<int64_t>& got,
                            int64_t k, const char* what, float rel_tol = kRelTol) {
  ASSERT_EQ(want.size(), got.size());
  int checked = 0, found = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    found += want[i] >= 0;
    if (want[i] < 0) {
      EXPECT_EQ(got[i], -1) << what << " entry " << i;
      continue;
    }
    ASSERT_GE(got[i], 0) << what << " entry " << i;
    const float tol = rel_tol * std::max(1.0f, std::fabs(want_d[i]));
    EXPECT_NEAR(got_d[i], want_d[i], tol) << what << " entry " << i;
    const size_t j = i % size_t(k);
    const bool tie_before = j > 0 && std::fabs(want_d[i] - want_d[i - 1]) <= 2 * tol;
    const bool tie_after =
        j + 1 < size_t(k) && want[i + 1] >= 0 && std::fabs(want_d[i + 1] - want_d[i]) <= 2 * tol;
    if (!tie_before && !tie_after) {
      EXPECT_EQ(got[i], want[i]) << what << " entry " << i;
      ++checked;
    }
  }
  EXPECT_GT(checked, found / 2) << what << ": too many near-ties to check ids";
}

class ListScanLevels : public ::testing::TestWithParam<KernelIsa> {};

TEST_P(ListScanLevels, L2RowsEqualTheSequentialSumUpToRounding) {
  ScopedKernelIsa level(GetParam());
  ASSERT_TRUE(level.ok());
  for (int d : {1, 3, 4, 17, 63, 64, 65, 130}) {
    for (int64_t n : {0, 1, 3, 4, 5, 33}) {
      const std::vector<float> q = Normal(d, 7, 3.0f), rows = Normal(n * d, 8 + d, 3.0f);
      std::vector<float> want(static_cast<size_t>(n)), got(static_cast<size_t>(n), -1.0f);
      reference::L2SqrRows(q.data(), rows.data(), n, d, want.data());
      L2SqrRows(q.data(), rows.data(), n, d, got.data());
      for (int64_t i = 0; i < n; ++i) {
        EXPECT_NEAR(got[size_t(i)], want[size_t(i)], kRelTol * want[size_t(i)])
            << "d " << d << " n " << n << " row " << i;
      }
    }
  }
}

TEST_P(ListScanLevels, L2ColumnsEqualTheSequentialSumUpToRounding) {
  ScopedKernelIsa level(GetParam());
  ASSERT_TRUE(level.ok());
  for (int d : {1, 3, 17, 64, 65}) {
    for (int64_t n : {1, 15, 16, 17, 100}) {
      const std::vector<float> q = Normal(d, 9, 3.0f), rows = Normal(n * d, 10 + d, 3.0f);
      faiss::IndexFlatL2 quantizer(d);
      quantizer.add(n, rows.data());
      CentroidCache cache;
      const std::shared_ptr<const CentroidColumns> columns = cache.For(quantizer);
      EXPECT_EQ(cache.For(quantizer), columns);  // made once
      ASSERT_EQ(columns->stride % 16, 0);
      std::vector<float> want(static_cast<size_t>(n)), got(static_cast<size_t>(n), -1.0f);
      reference::L2SqrRows(q.data(), rows.data(), n, d, want.data());
      L2SqrColumns(q.data(), columns->values.data(), columns->stride, n, d, got.data());
      for (int64_t i = 0; i < n; ++i) {
        EXPECT_NEAR(got[size_t(i)], want[size_t(i)], kRelTol * want[size_t(i)])
            << "d " << d << " n " << n << " column " << i;
      }
      // Batches of 1 to 9 queries (blocks of four and every remainder):
      // each query's distances bitwise its own call's.
      for (int nq : {1, 2, 3, 4, 5, 9}) {
        const std::vector<float> qs = Normal(int64_t(nq) * d, 20 + nq, 3.0f);
        std::vector<float> batch(size_t(nq * n), -1.0f), one(static_cast<size_t>(n));
        L2SqrColumnsBatch(qs.data(), nq, columns->values.data(), columns->stride, n, d,
                          batch.data());
        for (int k = 0; k < nq; ++k) {
          L2SqrColumns(qs.data() + k * d, columns->values.data(), columns->stride, n, d,
                       one.data());
          for (int64_t i = 0; i < n; ++i) {
            ASSERT_EQ(batch[size_t(k * n + i)], one[size_t(i)])
                << "d " << d << " n " << n << " nq " << nq << " query " << k << " column " << i;
          }
        }
      }
      // More centroids: the cache makes the columns again.
      quantizer.add(1, rows.data());
      EXPECT_NE(cache.For(quantizer), columns);
      EXPECT_EQ(cache.For(quantizer)->n, n + 1);
    }
  }
}

TEST_P(ListScanLevels, IvfSearchEqualsBruteForceAndFaiss) {
  ScopedKernelIsa level(GetParam());
  ASSERT_TRUE(level.ok());
  for (const auto& [d, nlist, n] :
       std::vector<std::tuple<int, int, int64_t>>{{17, 16, 3001}, {65, 40, 2500}, {3, 5, 77}}) {
    faiss::IndexFlatL2 quantizer(d);
    faiss::IndexIVFFlat ivf(&quantizer, size_t(d), size_t(nlist));
    // Clustered, so list sizes vary (and most are off the 32-row tiles).
    std::vector<float> centers = Normal(20 * d, 3, 4.0f), data = Normal(n * d, 4);
    for (int64_t i = 0; i < n; ++i) {
      for (int t = 0; t < d; ++t) data[size_t(i * d + t)] += centers[size_t((i % 20) * d + t)];
    }
    ivf.train(n, data.data());
    std::vector<faiss::Index::idx_t> ids(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) ids[size_t(i)] = 1000 + 3 * i;  // not row numbers
    ivf.add_with_ids(n, data.data(), ids.data());
    ASSERT_EQ(ScannableIvf(&ivf), &ivf);
    const int64_t nq = 37;
    std::vector<float> queries = Normal(nq * d, 5, 4.0f);
    EvenIds even;
    const int saved_threads = omp_get_max_threads();
    for (int nprobe : {1, 3, nlist + 5}) {
      for (int64_t k : {int64_t(1), int64_t(10), n + 3}) {
        for (const IdFilter* filter :
             {static_cast<const IdFilter*>(nullptr), static_cast<const IdFilter*>(&even)}) {
          SCOPED_TRACE(::testing::Message() << "d " << d << " nprobe " << nprobe << " k " << k
                                            << (filter ? " filtered" : ""));
          std::vector<float> want_d, got_d(size_t(nq * k));
          std::vector<int64_t> want, got(size_t(nq * k));
          BruteForce(ivf, queries.data(), nq, k, nprobe, filter, &want_d, &want);
          ListScanSearch(&ivf, nullptr, queries.data(), nq, k, nprobe, filter, got_d.data(),
                         got.data());
          ExpectSameUpToRounding(want_d, want, got_d, got, k, "batch vs brute force");
          // The quantizer step over the transposed centroids.
          {
            CentroidCache cache;
            std::vector<float> col_d(size_t(nq * k));
            std::vector<int64_t> col(size_t(nq * k));
            ListScanSearch(&ivf, nullptr, queries.data(), nq, k, nprobe, filter, col_d.data(),
                           col.data(), cache.For(quantizer).get());
            ExpectSameUpToRounding(want_d, want, col_d, col, k, "columns vs brute force");
          }
          // One query per call gives the batch's answers bit for bit (the
          // same kernel over the same tiles), on one thread or two.
          for (int threads : {1, 2}) {
            omp_set_num_threads(threads);
            std::vector<float> one_d(static_cast<size_t>(k));
            std::vector<int64_t> one(static_cast<size_t>(k));
            for (int64_t q = 0; q < nq; q += 9) {
              ListScanSearch(&ivf, nullptr, queries.data() + q * d, 1, k, nprobe, filter,
                             one_d.data(), one.data());
              for (int64_t j = 0; j < k; ++j) {
                ASSERT_EQ(one[size_t(j)], got[size_t(q * k + j)]) << "query " << q;
                ASSERT_EQ(one_d[size_t(j)], got_d[size_t(q * k + j)]) << "query " << q;
              }
            }
            std::vector<float> again_d(size_t(nq * k));
            std::vector<int64_t> again(size_t(nq * k));
            ListScanSearch(&ivf, nullptr, queries.data(), nq, k, nprobe, filter, again_d.data(),
                           again.data());
            EXPECT_EQ(again, got) << threads << " threads";
          }
          omp_set_num_threads(saved_threads);
          if (filter == nullptr) {
            // FAISS's own search of the same index.
            ivf.nprobe = size_t(nprobe);
            std::vector<float> faiss_d(size_t(nq * k));
            std::vector<faiss::Index::idx_t> faiss_l(size_t(nq * k));
            ivf.search(nq, queries.data(), k, faiss_d.data(), faiss_l.data());
            for (float& v : faiss_d) {
              if (v == std::numeric_limits<float>::max())
                v = std::numeric_limits<float>::infinity();
            }
            ExpectSameUpToRounding(faiss_d, std::vector<int64_t>(faiss_l.begin(), faiss_l.end()),
                                   got_d, got, k, "vs FAISS");
          }
        }
      }
    }
  }
}

TEST_P(ListScanLevels, FlatSearchEqualsFaiss) {
  ScopedKernelIsa level(GetParam());
  ASSERT_TRUE(level.ok());
  const int d = 65;
  const int64_t n = 1003, nq = 21, k = 25;
  faiss::IndexIDMap idmap(new faiss::IndexFlatL2(d));
  idmap.own_fields = true;
  const std::vector<float> data = Normal(n * d, 11), queries = Normal(nq * d, 12);
  std::vector<faiss::Index::idx_t> ids(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) ids[size_t(i)] = 7 * i + 1;
  idmap.add_with_ids(n, data.data(), ids.data());
  ASSERT_EQ(ScannableFlat(&idmap), &idmap);
  std::vector<float> want_d(size_t(nq * k)), got_d(size_t(nq * k));
  std::vector<faiss::Index::idx_t> want(size_t(nq * k));
  std::vector<int64_t> got(size_t(nq * k));
  idmap.search(nq, queries.data(), k, want_d.data(), want.data());
  ListScanSearch(nullptr, &idmap, queries.data(), nq, k, 0, nullptr, got_d.data(), got.data());
  ExpectSameUpToRounding(want_d, std::vector<int64_t>(want.begin(), want.end()), got_d, got, k,
                         "flat vs FAISS");
}

// The lists a query probes, against a stable sort that puts NaN last: ties
// (repeated distances are frequent here) go to the smaller index, at every
// offset of the 16-distance blocks the one-pass selection skips over.
TEST(ListScan, NearestListsEqualsAStableSortWithTiesAndNaN) {
  std::mt19937_64 rng(11);
  std::uniform_int_distribution<int> value(0, 40);
  std::uniform_real_distribution<double> unit(0, 1);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  int checked = 0;
  for (int64_t n : {1, 5, 16, 17, 31, 48, 100, 1031}) {
    for (int64_t probes : {1, 2, 3, 7, 16, 17, 40}) {
      if (probes > n) continue;
      for (double nan_share : {0.0, 0.05, 0.9}) {
        for (int rep = 0; rep < 5; ++rep) {
          std::vector<float> dist(static_cast<size_t>(n));
          // Few distinct values: ties everywhere; descending runs make the
          // kept bound fall often.
          for (int64_t j = 0; j < n; ++j) {
            dist[size_t(j)] =
                unit(rng) < nan_share ? nan : float(value(rng)) + (rep == 4 ? float(n - j) : 0.0f);
          }
          std::vector<int32_t> want(static_cast<size_t>(n));
          for (int64_t j = 0; j < n; ++j) want[size_t(j)] = int32_t(j);
          std::stable_sort(want.begin(), want.end(), [&](int32_t a, int32_t b) {
            const float x = dist[size_t(a)], y = dist[size_t(b)];
            if (std::isnan(x) || std::isnan(y)) return !std::isnan(x) && std::isnan(y);
            return x < y;
          });
          want.resize(size_t(probes));
          std::vector<int32_t> got(static_cast<size_t>(probes), -7);
          NearestLists(dist.data(), n, probes, got.data());
          ASSERT_EQ(got, want) << "n " << n << " probes " << probes << " NaN share " << nan_share
                               << " rep " << rep;
          ++checked;
        }
      }
    }
  }
  EXPECT_GT(checked, 500);
}

// Batches larger than a chunk (kListScanChunk) give what one query per call
// gives, bit for bit.
TEST(ListScan, BatchesLargerThanAChunkEqualOneQueryPerCall) {
  const int d = 9, nlist = 8;
  const int64_t n = 600, k = 5, nq = kListScanChunk + 37;
  faiss::IndexFlatL2 quantizer(d);
  faiss::IndexIVFFlat ivf(&quantizer, size_t(d), size_t(nlist));
  const std::vector<float> data = Normal(n * d, 21), queries = Normal(nq * d, 22);
  ivf.train(n, data.data());
  ivf.add(n, data.data());
  std::vector<float> got_d(size_t(nq * k)), one_d(static_cast<size_t>(k));
  std::vector<int64_t> got(size_t(nq * k)), one(static_cast<size_t>(k));
  ListScanSearch(&ivf, nullptr, queries.data(), nq, k, 2, nullptr, got_d.data(), got.data());
  for (int64_t q = 0; q < nq; q += 311) {
    ListScanSearch(&ivf, nullptr, queries.data() + q * d, 1, k, 2, nullptr, one_d.data(),
                   one.data());
    for (int64_t j = 0; j < k; ++j) {
      ASSERT_EQ(one[size_t(j)], got[size_t(q * k + j)]) << "query " << q;
      ASSERT_EQ(one_d[size_t(j)], got_d[size_t(q * k + j)]) << "query " << q;
    }
  }
  // The last chunk's last query too.
  ListScanSearch(&ivf, nullptr, queries.data() + (nq - 1) * d, 1, k, 2, nullptr, one_d.data(),
                 one.data());
  EXPECT_EQ(one, std::vector<int64_t>(got.end() - k, got.end()));
}

// Unsorted (CoarseSearchKnobs::any_order): each query gets the same k
// (distance, id) pairs as sorted, in some order, the padding last; with
// lists long enough that the scan cuts its buffer several times, and a k
// above what the probed lists hold.
TEST(ListScan, UnsortedGivesTheSameSetWithThePaddingLast) {
  const int d = 7, nlist = 4;
  const int64_t n = 5000, nq = 40;
  faiss::IndexFlatL2 quantizer(d);
  faiss::IndexIVFFlat ivf(&quantizer, size_t(d), size_t(nlist));
  const std::vector<float> data = Normal(n * d, 31), queries = Normal(nq * d, 32);
  ivf.train(n, data.data());
  ivf.add(n, data.data());
  for (int64_t k : {1, 10, 50, 3000}) {
    std::vector<float> want_d(size_t(nq * k)), got_d(size_t(nq * k));
    std::vector<int64_t> want(size_t(nq * k)), got(size_t(nq * k));
    ListScanSearch(&ivf, nullptr, queries.data(), nq, k, 1, nullptr, want_d.data(), want.data());
    ListScanSearch(&ivf, nullptr, queries.data(), nq, k, 1, nullptr, got_d.data(), got.data(),
                   nullptr, /*sorted=*/false);
    int64_t out_of_order = 0;
    for (int64_t q = 0; q < nq; ++q) {
      std::vector<std::pair<float, int64_t>> a, b;
      for (int64_t j = 0; j < k; ++j) {
        a.emplace_back(want_d[size_t(q * k + j)], want[size_t(q * k + j)]);
        b.emplace_back(got_d[size_t(q * k + j)], got[size_t(q * k + j)]);
        if (j > 0 && got[size_t(q * k + j)] >= 0 && b[size_t(j)] < b[size_t(j - 1)]) {
          ++out_of_order;
        }
        // Padding only after the last pair found.
        if (j > 0 && got[size_t(q * k + j - 1)] < 0) {
          ASSERT_LT(got[size_t(q * k + j)], 0);
        }
      }
      std::sort(b.begin(), b.end(), [](const auto& x, const auto& y) {
        return (x.second >= 0) > (y.second >= 0) || ((x.second >= 0) == (y.second >= 0) && x < y);
      });
      ASSERT_EQ(a, b) << "k " << k << " query " << q;
    }
    // Not sorted by accident: some answer comes out of order.
    if (k >= 50) {
      EXPECT_GT(out_of_order, 0) << "k " << k;
    }
  }
}

// A filter that throws (a user's callback can) reaches the caller as an
// exception, from a batch that runs on two threads: it must not escape the
// parallel region, which would end the process.
TEST(ListScan, AnExceptionInsideTheScanReachesTheCaller) {
  class Throws : public IdFilter {
   public:
    bool Allows(int64_t id) const override {
      if (id == 123) throw std::runtime_error("filter failed on 123");
      return true;
    }
  } throws;
  const int d = 8;
  const int64_t n = 500, k = 4, nq = 16;
  faiss::IndexIDMap idmap(new faiss::IndexFlatL2(d));
  idmap.own_fields = true;
  const std::vector<float> data = Normal(n * d, 31), queries = Normal(nq * d, 32);
  std::vector<faiss::Index::idx_t> ids(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) ids[size_t(i)] = i;
  idmap.add_with_ids(n, data.data(), ids.data());
  const int saved_threads = omp_get_max_threads();
  omp_set_num_threads(2);
  std::vector<float> got_d(size_t(nq * k));
  std::vector<int64_t> got(size_t(nq * k));
  // Every query reaches id 123 while its heap is not yet full or the bound is
  // wide: k = n keeps every row a candidate.
  std::vector<float> all_d(size_t(nq * n));
  std::vector<int64_t> all(size_t(nq * n));
  EXPECT_THROW(
      ListScanSearch(nullptr, &idmap, queries.data(), nq, n, 0, &throws, all_d.data(), all.data()),
      std::runtime_error);
  omp_set_num_threads(saved_threads);
  // The index is untouched: a search without the filter still works.
  ListScanSearch(nullptr, &idmap, queries.data(), nq, k, 0, nullptr, got_d.data(), got.data());
  EXPECT_GE(got[0], 0);
}

// A retrain may refill the quantizer's buffer in place with as many
// centroids (same pointer, same count): the cache cannot see that, so the
// owner invalidates it, and the columns are made again from the new values.
TEST(ListScan, CentroidCacheIsMadeAgainAfterInvalidate) {
  const int d = 5;
  const int64_t n = 40;
  faiss::IndexFlatL2 quantizer(d);
  const std::vector<float> first = Normal(n * d, 41), second = Normal(n * d, 42);
  quantizer.add(n, first.data());
  CentroidCache cache;
  auto before = cache.For(quantizer);
  EXPECT_EQ(before->values[size_t(1 * before->stride + 3)], first[size_t(3 * d + 1)]);
  const float* xb = quantizer.get_xb();
  quantizer.reset();
  quantizer.add(n, second.data());
  ASSERT_EQ(quantizer.get_xb(), xb);  // the case the cache cannot detect
  cache.Invalidate();
  auto after = cache.For(quantizer);
  for (int64_t j = 0; j < n; ++j) {
    for (int t = 0; t < d; ++t) {
      ASSERT_EQ(after->values[size_t(t * after->stride + j)], second[size_t(j * d + t)]);
    }
  }
}

// SQ8 rows: the folded decoding (a - b c)^2 against FAISS's decoding then the
// sequential sum. Tolerance: the terms are rounded a few more times than the
// reference's (a and b, then a - b c), each within 2^-24 of the magnitudes
// |q_t| + |x_t|, so 1e-6 of sum_t (|q_t| + |x_t|)^2 covers d <= 130 with
// room; half a code step off (a decoding bug) moves a distance by about
// |q_t - x_t| vdiff_t / 255 per dimension, far more.
TEST_P(ListScanLevels, Sq8RowsEqualFaissDecodingUpToRounding) {
  ScopedKernelIsa level(GetParam());
  ASSERT_TRUE(level.ok());
  std::mt19937_64 rng(13);
  std::uniform_int_distribution<int> code(0, 255);
  for (int d : {1, 3, 17, 64, 65}) {
    for (int64_t n : {1, 5, 33}) {
      const std::vector<float> q = Normal(d, 14 + d);
      std::vector<float> vmin = Normal(d, 15 + d), vdiff(static_cast<size_t>(d));
      for (float& v : vdiff) v = 0.5f + float(code(rng)) / 64.0f;
      std::vector<uint8_t> codes(size_t(n * d));
      for (uint8_t& c : codes) c = uint8_t(code(rng));
      std::vector<float> want(static_cast<size_t>(n)), got(static_cast<size_t>(n), -1.0f);
      reference::L2SqrSq8Rows(q.data(), vmin.data(), vdiff.data(), codes.data(), n, d, want.data());
      L2SqrSq8Rows(q.data(), vmin.data(), vdiff.data(), codes.data(), n, d, got.data());
      for (int64_t i = 0; i < n; ++i) {
        double magnitude = 0;
        for (int t = 0; t < d; ++t) {
          const double x =
              vmin[size_t(t)] + (codes[size_t(i * d + t)] + 0.5) / 255 * vdiff[size_t(t)];
          magnitude += std::pow(std::fabs(q[size_t(t)]) + std::fabs(x), 2);
        }
        EXPECT_NEAR(got[size_t(i)], want[size_t(i)], 1e-6 * magnitude)
            << "d " << d << " n " << n << " row " << i;
      }
    }
  }
}

// IVF-SQ8 (residual codes, as the factory string IVF<n>,SQ8 builds, and
// plain codes) and flat SQ8 searched by the list scan against a brute force
// over FAISS's own reconstructions and against FAISS's search.
TEST_P(ListScanLevels, Sq8SearchEqualsBruteForceAndFaiss) {
  ScopedKernelIsa level(GetParam());
  ASSERT_TRUE(level.ok());
  constexpr float kSq8Tol = 1e-4f;  // another rounding of each term (above)
  const int d = 17, nlist = 12;
  const int64_t n = 2000, nq = 23, k = 10;
  std::vector<float> centers = Normal(10 * d, 16, 4.0f), data = Normal(n * d, 17);
  for (int64_t i = 0; i < n; ++i) {
    for (int t = 0; t < d; ++t) data[size_t(i * d + t)] += centers[size_t((i % 10) * d + t)];
  }
  const std::vector<float> queries = Normal(nq * d, 18, 4.0f);
  std::vector<faiss::Index::idx_t> ids(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) ids[size_t(i)] = 5 * i + 2;
  EvenIds even;
  for (const bool residual : {true, false}) {
    faiss::IndexFlatL2 quantizer(d);
    faiss::IndexIVFScalarQuantizer ivf(&quantizer, size_t(d), size_t(nlist),
                                       faiss::ScalarQuantizer::QT_8bit, faiss::METRIC_L2, residual);
    ivf.train(n, data.data());
    ivf.add_with_ids(n, data.data(), ids.data());
    ASSERT_EQ(ScannableIvf(&ivf), &ivf);
    for (int nprobe : {1, 4, nlist}) {
      for (const IdFilter* filter :
           {static_cast<const IdFilter*>(nullptr), static_cast<const IdFilter*>(&even)}) {
        SCOPED_TRACE(::testing::Message() << (residual ? "residual" : "plain") << " nprobe "
                                          << nprobe << (filter ? " filtered" : ""));
        // Brute force: every vector of the probed lists, reconstructed by
        // FAISS (centroid + decoded residual), scored in sequential floats.
        std::vector<float> want_d(size_t(nq * k), std::numeric_limits<float>::infinity());
        std::vector<int64_t> want(size_t(nq * k), -1);
        for (int64_t q = 0; q < nq; ++q) {
          std::vector<float> cd(static_cast<size_t>(nlist));
          reference::L2SqrRows(queries.data() + q * d, quantizer.get_xb(), nlist, d, cd.data());
          std::vector<std::pair<float, int64_t>> lists, all;
          for (int64_t l = 0; l < nlist; ++l) lists.emplace_back(cd[size_t(l)], l);
          std::sort(lists.begin(), lists.end());
          for (int j = 0; j < nprobe; ++j) {
            const int64_t l = lists[size_t(j)].second;
            for (size_t o = 0; o < ivf.invlists->list_size(size_t(l)); ++o) {
              const int64_t id = ivf.invlists->get_single_id(size_t(l), o);
              if (filter != nullptr && !filter->Allows(id)) continue;
              std::vector<float> x(static_cast<size_t>(d));
              ivf.reconstruct_from_offset(l, int64_t(o), x.data());
              float dist = 0;
              reference::L2SqrRows(queries.data() + q * d, x.data(), 1, d, &dist);
              all.emplace_back(dist, id);
            }
          }
          std::sort(all.begin(), all.end());
          for (int64_t j = 0; j < std::min<int64_t>(k, int64_t(all.size())); ++j) {
            want_d[size_t(q * k + j)] = all[size_t(j)].first;
            want[size_t(q * k + j)] = all[size_t(j)].second;
          }
        }
        std::vector<float> got_d(size_t(nq * k));
        std::vector<int64_t> got(size_t(nq * k));
        ListScanSearch(&ivf, nullptr, queries.data(), nq, k, nprobe, filter, got_d.data(),
                       got.data());
        ExpectSameUpToRounding(want_d, want, got_d, got, k, "sq8 vs brute force", kSq8Tol);
        if (filter == nullptr) {
          ivf.nprobe = size_t(nprobe);
          std::vector<float> faiss_d(size_t(nq * k));
          std::vector<faiss::Index::idx_t> faiss_l(size_t(nq * k));
          ivf.search(nq, queries.data(), k, faiss_d.data(), faiss_l.data());
          ExpectSameUpToRounding(faiss_d, std::vector<int64_t>(faiss_l.begin(), faiss_l.end()),
                                 got_d, got, k, "sq8 vs FAISS", kSq8Tol);
        }
      }
    }
  }
  // Flat SQ8 under an id map.
  faiss::IndexIDMap idmap(new faiss::IndexScalarQuantizer(d, faiss::ScalarQuantizer::QT_8bit));
  idmap.own_fields = true;
  idmap.train(n, data.data());
  idmap.add_with_ids(n, data.data(), ids.data());
  ASSERT_EQ(ScannableFlat(&idmap), &idmap);
  std::vector<float> want_d(size_t(nq * k)), got_d(size_t(nq * k));
  std::vector<faiss::Index::idx_t> want(size_t(nq * k));
  std::vector<int64_t> got(size_t(nq * k));
  idmap.search(nq, queries.data(), k, want_d.data(), want.data());
  ListScanSearch(nullptr, &idmap, queries.data(), nq, k, 0, nullptr, got_d.data(), got.data());
  ExpectSameUpToRounding(want_d, std::vector<int64_t>(want.begin(), want.end()), got_d, got, k,
                         "flat sq8 vs FAISS", kSq8Tol);
}

// Every half that FAISS's decode_fp16 widens (the tests build without F16C:
// faiss/utils/fp16-inl.h's bit operations) has the value the reference's
// field-by-field HalfToFloat gives it: bit for bit, NaN for NaN.
TEST(ListScan, HalfToFloatEqualsFaissOnEveryHalf) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float want = faiss::decode_fp16(uint16_t(h));
    const float got = reference::HalfToFloat(uint16_t(h));
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << "half " << h;
    } else {
      EXPECT_EQ(std::memcmp(&want, &got, sizeof(float)), 0)
          << "half " << h << ": " << want << " vs " << got;
    }
  }
}

// fp16 rows: the active kernel against the reference. Every finite half
// (zeros, subnormals, the largest) is a code of some row, and each row is
// scored against its own decoding: the distance is exactly 0 only if every
// half was widened exactly, sign and all (a subnormal off by one ulp, 1e-8,
// would not show in a tolerance). The other rows of the same call (four at a
// time, and a remainder) and random rows on odd dimensions equal the
// reference up to the summation order: kRelTol of the distance, a sum of
// squares.
TEST_P(ListScanLevels, Fp16RowsEqualTheReferenceUpToRounding) {
  ScopedKernelIsa level(GetParam());
  ASSERT_TRUE(level.ok());
  std::vector<uint16_t> halves;
  for (uint32_t h = 0; h < 65536; ++h) {
    if (((h >> 10) & 0x1f) != 0x1f) halves.push_back(uint16_t(h));  // no inf or NaN
  }
  for (int d : {13, 16}) {
    const int64_t rows = int64_t(halves.size()) / d;
    std::vector<float> q(static_cast<size_t>(d));
    for (int64_t i = 0; i < rows; ++i) {
      const uint16_t* row = halves.data() + i * d;
      for (int t = 0; t < d; ++t) q[size_t(t)] = reference::HalfToFloat(row[t]);
      const int64_t n = std::min<int64_t>(i % 2 == 0 ? 4 : 3, rows - i);
      std::vector<float> want(static_cast<size_t>(n)), got(static_cast<size_t>(n), -1.0f);
      reference::L2SqrFp16Rows(q.data(), row, n, d, want.data());
      L2SqrFp16Rows(q.data(), row, n, d, got.data());
      ASSERT_EQ(got[0], 0.0f) << "d " << d << " row " << i;
      for (int64_t r = 1; r < n; ++r) {
        ASSERT_NEAR(got[size_t(r)], want[size_t(r)], kRelTol * want[size_t(r)])
            << "d " << d << " row " << i + r;
      }
    }
  }
  for (int d : {1, 3, 7, 8, 9, 15, 17, 31, 64, 65}) {
    for (int64_t n : {1, 3, 4, 5, 33}) {
      const std::vector<float> q = Normal(d, 30 + d);
      const std::vector<float> x = Normal(n * d, 31 + d, 2.0f);
      std::vector<uint16_t> codes(size_t(n * d));
      for (size_t i = 0; i < codes.size(); ++i) codes[i] = faiss::encode_fp16(x[i]);
      std::vector<float> want(static_cast<size_t>(n)), got(static_cast<size_t>(n), -1.0f);
      reference::L2SqrFp16Rows(q.data(), codes.data(), n, d, want.data());
      L2SqrFp16Rows(q.data(), codes.data(), n, d, got.data());
      for (int64_t i = 0; i < n; ++i) {
        EXPECT_NEAR(got[size_t(i)], want[size_t(i)], kRelTol * want[size_t(i)])
            << "d " << d << " n " << n << " row " << i;
      }
    }
  }
}

// FAISS's filter for the ids EvenIds allows: `ids` maps an inner index's
// positions to ids (null: the ids are the positions' labels).
class EvenSelector : public faiss::IDSelector {
 public:
  explicit EvenSelector(const std::vector<faiss::Index::idx_t>* ids = nullptr) : ids_(ids) {}
  bool is_member(faiss::Index::idx_t id) const override {
    return (ids_ != nullptr ? (*ids_)[size_t(id)] : id) % 2 == 0;
  }

 private:
  const std::vector<faiss::Index::idx_t>* ids_;
};

// IVF-SQfp16 (residual codes, as the factory string IVF<n>,SQfp16 builds,
// and plain codes) and flat SQfp16 under an id map, searched by the list scan
// against FAISS's own search, unfiltered and filtered (FAISS's IDSelector),
// on odd dimensions and list sizes. Tolerance: the halves are widened
// exactly on both sides, but FAISS scores the residual query (q - c) as the
// list scan does in another summation order: 1e-5 of the distance (d <= 33).
// The residual taken off the wrong side, or not at all, moves distances by
// the centroids' norms; a decoding off by an ulp of a half (1e-3 relative)
// moves them by far more than the tolerance too.
TEST_P(ListScanLevels, Fp16SearchEqualsFaiss) {
  ScopedKernelIsa level(GetParam());
  ASSERT_TRUE(level.ok());
  constexpr float kFp16Tol = 1e-5f;
  const int64_t nq = 23, k = 10;
  for (const int d : {7, 33}) {
    const int nlist = 13;
    const int64_t n = 2001;
    std::vector<float> centers = Normal(10 * d, 40 + d, 4.0f), data = Normal(n * d, 41 + d);
    for (int64_t i = 0; i < n; ++i) {
      for (int t = 0; t < d; ++t) data[size_t(i * d + t)] += centers[size_t((i % 10) * d + t)];
    }
    const std::vector<float> queries = Normal(nq * d, 42 + d, 4.0f);
    std::vector<faiss::Index::idx_t> ids(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) ids[size_t(i)] = 5 * i + 2 + (i % 3);
    EvenIds even;
    EvenSelector even_ids;
    for (const bool residual : {true, false}) {
      faiss::IndexFlatL2 quantizer(d);
      faiss::IndexIVFScalarQuantizer ivf(&quantizer, size_t(d), size_t(nlist),
                                         faiss::ScalarQuantizer::QT_fp16, faiss::METRIC_L2,
                                         residual);
      ivf.train(n, data.data());
      ivf.add_with_ids(n, data.data(), ids.data());
      ASSERT_EQ(ScannableIvf(&ivf), &ivf);
      for (int nprobe : {1, 4, nlist}) {
        for (const bool filtered : {false, true}) {
          SCOPED_TRACE(::testing::Message()
                       << "d " << d << (residual ? " residual" : " plain") << " nprobe " << nprobe
                       << (filtered ? " filtered" : ""));
          faiss::SearchParametersIVF params;
          params.nprobe = size_t(nprobe);
          params.sel = filtered ? &even_ids : nullptr;
          std::vector<float> want_d(size_t(nq * k));
          std::vector<faiss::Index::idx_t> want(size_t(nq * k));
          ivf.search(nq, queries.data(), k, want_d.data(), want.data(), &params);
          std::vector<float> got_d(size_t(nq * k));
          std::vector<int64_t> got(size_t(nq * k));
          ListScanSearch(&ivf, nullptr, queries.data(), nq, k, nprobe, filtered ? &even : nullptr,
                         got_d.data(), got.data());
          ExpectSameUpToRounding(want_d, std::vector<int64_t>(want.begin(), want.end()), got_d, got,
                                 k, "fp16 vs FAISS", kFp16Tol);
          for (size_t i = 0; filtered && i < got.size(); ++i) {
            ASSERT_TRUE(got[i] < 0 || got[i] % 2 == 0) << "entry " << i;
          }
        }
      }
    }
    // Flat SQfp16 under an id map. FAISS's IndexIDMap passes no filter down,
    // so the filtered search is the inner index's, over positions.
    faiss::IndexIDMap idmap(new faiss::IndexScalarQuantizer(d, faiss::ScalarQuantizer::QT_fp16));
    idmap.own_fields = true;
    idmap.add_with_ids(n, data.data(), ids.data());
    ASSERT_EQ(ScannableFlat(&idmap), &idmap);
    EvenSelector even_positions(&idmap.id_map);
    for (const bool filtered : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "flat d " << d << (filtered ? " filtered" : ""));
      faiss::SearchParameters params;
      params.sel = filtered ? &even_positions : nullptr;
      std::vector<float> want_d(size_t(nq * k));
      std::vector<faiss::Index::idx_t> want(size_t(nq * k));
      idmap.index->search(nq, queries.data(), k, want_d.data(), want.data(), &params);
      for (auto& label : want) label = label < 0 ? -1 : idmap.id_map[size_t(label)];
      std::vector<float> got_d(size_t(nq * k));
      std::vector<int64_t> got(size_t(nq * k));
      ListScanSearch(nullptr, &idmap, queries.data(), nq, k, 0, filtered ? &even : nullptr,
                     got_d.data(), got.data());
      ExpectSameUpToRounding(want_d, std::vector<int64_t>(want.begin(), want.end()), got_d, got, k,
                             "flat fp16 vs FAISS", kFp16Tol);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Levels, ListScanLevels, ::testing::ValuesIn(SupportedKernelIsas()),
                         KernelIsaParamName);

TEST(ListScan, OnlyPlainFloatIndexesAreScanned) {
  faiss::IndexFlatL2 quantizer(8);
  faiss::IndexIVFFlat untrained(&quantizer, 8, 4);
  EXPECT_EQ(ScannableIvf(&untrained), nullptr);  // no centroids yet
  faiss::IndexFlatIP ip_quantizer(8);
  faiss::IndexIVFFlat inner_product(&ip_quantizer, 8, 4, faiss::METRIC_INNER_PRODUCT);
  EXPECT_EQ(ScannableIvf(&inner_product), nullptr);
  faiss::IndexIDMap ip_flat(new faiss::IndexFlatIP(8));
  ip_flat.own_fields = true;
  EXPECT_EQ(ScannableFlat(&ip_flat), nullptr);
  // Other scalar quantizers stay with FAISS.
  faiss::IndexFlatL2 sq_quantizer(8);
  faiss::IndexIVFScalarQuantizer sq4(&sq_quantizer, 8, 4, faiss::ScalarQuantizer::QT_4bit);
  const std::vector<float> data = Normal(8 * 200, 19);
  sq4.train(200, data.data());
  EXPECT_EQ(ScannableIvf(&sq4), nullptr);
  faiss::IndexIDMap sq6(new faiss::IndexScalarQuantizer(8, faiss::ScalarQuantizer::QT_6bit));
  sq6.own_fields = true;
  sq6.train(200, data.data());
  EXPECT_EQ(ScannableFlat(&sq6), nullptr);
  // fp16 rows are scanned (Fp16SearchEqualsFaiss), but not under an inner
  // product.
  faiss::IndexFlatIP fp16_ip_quantizer(8);
  faiss::IndexIVFScalarQuantizer fp16_ip(&fp16_ip_quantizer, 8, 4, faiss::ScalarQuantizer::QT_fp16,
                                         faiss::METRIC_INNER_PRODUCT);
  fp16_ip.train(200, data.data());
  EXPECT_EQ(ScannableIvf(&fp16_ip), nullptr);
}

}  // namespace
}  // namespace index
}  // namespace hedgedb
