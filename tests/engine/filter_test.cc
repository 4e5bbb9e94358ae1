// Filtered search: label and payload conditions, applied inside stage 1, give
// what an exhaustive scan of the passing items gives.
#include <set>

#include "engine_test_util.h"

namespace hedgedb {
namespace testing {
namespace {

std::set<int64_t> IdsOf(const SearchResult& r) {
  std::set<int64_t> ids;
  for (const SearchHit& h : r.hits) ids.insert(h.id);
  return ids;
}

// The fraction of the exhaustive filtered top-k that `got` found, over all
// queries.
double RecallAgainst(const std::vector<SearchResult>& exact, const std::vector<SearchResult>& got) {
  size_t found = 0, wanted = 0;
  for (size_t q = 0; q < exact.size(); ++q) {
    const std::set<int64_t> g = IdsOf(got[q]);
    for (const SearchHit& h : exact[q].hits) found += g.count(h.id);
    wanted += exact[q].hits.size();
  }
  return wanted == 0 ? 1.0 : double(found) / double(wanted);
}

SearchFilter LabelsIn(int64_t first, int64_t count) {
  SearchFilter f;
  f.label_rule = SearchFilter::LabelRule::kIn;
  for (int64_t l = first; l < first + count; ++l) f.labels.push_back(l);
  return f;
}

// Every hit passes the filter (labels id % 1000 as ingested below).
void ExpectAllPass(const std::vector<SearchResult>& results, const std::set<int64_t>& labels) {
  for (const SearchResult& r : results) {
    for (const SearchHit& h : r.hits) {
      ASSERT_TRUE(h.has_label);
      EXPECT_TRUE(labels.count(h.label)) << "id " << h.id << " label " << h.label;
    }
  }
}

// 100k Gaussian items (D = 16, the default IVF index), filters that keep
// 50%, 5% and 0.1% of them: the two-stage filtered top 10 holds at least 95%
// of the exhaustive filtered top 10, and every hit passes.
TEST(FilterTest, SelectivitiesOnHundredThousandItems) {
  TempDir dir;
  auto db = OpenDb(dir.path());
  const CollectionSpec spec = MakeSpec("c", Kind::kGaussian, 16);
  ASSERT_TRUE(db->CreateCollection(spec).ok());
  const int64_t n = 100000;
  for (int64_t first = 0; first < n; first += 25000) {
    Batch b = RandomBatch(spec, 25000, first, uint64_t(first) + 1);
    for (int64_t i = 0; i < b.n; ++i) b.labels[i] = b.ids[i] % 1000;
    ASSERT_TRUE(db->Ingest("c", b.ingest(), nullptr).ok());
  }
  ASSERT_TRUE(db->Flush().ok());
  ASSERT_TRUE(StatsOf(db.get(), "c").index_trained);
  const Batch queries = QueryBatch(spec, 50, 99);

  for (int64_t keep : {500, 50, 1}) {  // labels kept of 1000: 50%, 5%, 0.1%
    SCOPED_TRACE("labels kept: " + std::to_string(keep));
    SearchOptions o;
    o.k = 10;
    o.with_uncertainty = false;
    o.filter = LabelsIn(0, keep);
    std::vector<SearchResult> got, exact;
    ASSERT_TRUE(db->Search("c", queries.view(), o, &got).ok());
    o.exhaustive = true;
    ASSERT_TRUE(db->Search("c", queries.view(), o, &exact).ok());
    std::set<int64_t> labels(o.filter.labels.begin(), o.filter.labels.end());
    ExpectAllPass(got, labels);
    for (size_t q = 0; q < got.size(); ++q) {
      EXPECT_EQ(got[q].passing, keep * 100);
      ASSERT_EQ(got[q].hits.size(), 10u);
      ASSERT_EQ(exact[q].hits.size(), 10u);
    }
    const double recall = RecallAgainst(exact, got);
    EXPECT_GE(recall, 0.95);
    std::printf("[ filter ] %.1f%% pass: recall@10 %.3f, scored per query %lld\n",
                100.0 * double(keep) / 1000, recall, (long long)got[0].scored);
  }
}

// Fewer passing items than k: exactly those come back, for the index kinds
// that filter inside FAISS's scan (flat PQ, which filters afterwards, is
// the codes collections' index: CodesCollection).
TEST(FilterTest, FewerPassingThanKReturnsExactlyThem) {
  for (const std::string factory : {"", "HNSW16", "Flat", "IVF16,SQ8", "IVF16,SQfp16", "SQfp16"}) {
    SCOPED_TRACE("factory '" + factory + "'");
    TempDir dir;
    auto db = OpenDb(dir.path());
    const CollectionSpec spec = MakeSpec("c", Kind::kGaussian, 8, factory);
    ASSERT_TRUE(db->CreateCollection(spec).ok());
    Batch b = RandomBatch(spec, 3000, 0, 5);
    for (int64_t i = 0; i < b.n; ++i) b.labels[i] = b.ids[i] % 500;  // 6 items per label
    ASSERT_TRUE(db->Ingest("c", b.ingest(), nullptr).ok());
    ASSERT_TRUE(db->Flush().ok());
    const Batch queries = QueryBatch(spec, 5, 3);
    SearchOptions o;
    o.k = 10;
    o.filter = LabelsIn(7, 1);
    std::vector<SearchResult> got;
    ASSERT_TRUE(db->Search("c", queries.view(), o, &got).ok());
    const std::set<int64_t> expected = {7, 507, 1007, 1507, 2007, 2507};
    for (const SearchResult& r : got) {
      EXPECT_EQ(r.passing, 6);
      EXPECT_EQ(IdsOf(r), expected);
    }
    // And with many passing, stage 1 with the filter matches the exhaustive
    // filtered scan on these 3000 items.
    o.filter = LabelsIn(0, 250);
    o.filter.label_rule = SearchFilter::LabelRule::kNotIn;  // half pass
    std::vector<SearchResult> exact;
    ASSERT_TRUE(db->Search("c", queries.view(), o, &got).ok());
    o.exhaustive = true;
    ASSERT_TRUE(db->Search("c", queries.view(), o, &exact).ok());
    for (const SearchResult& r : got) {
      EXPECT_EQ(r.passing, 1500);
      for (const SearchHit& h : r.hits) EXPECT_GE(h.label, 250);
    }
    EXPECT_GE(RecallAgainst(exact, got), 0.95);
  }
}

// Codes collections (flat PQ: filtered after stage 1, widening) too.
TEST(FilterTest, CodesCollection) {
  TempDir dir;
  auto db = OpenDb(dir.path());
  const CollectionSpec spec = MakeSpec("c", Kind::kCodes, 8);
  ASSERT_TRUE(db->CreateCollection(spec).ok());
  Batch b = RandomBatch(spec, 5000, 0, 5);
  for (int64_t i = 0; i < b.n; ++i) b.labels[i] = b.ids[i] % 100;
  ASSERT_TRUE(db->Ingest("c", b.ingest(), nullptr).ok());
  const Batch queries = QueryBatch(spec, 10, 3);
  SearchOptions o;
  o.k = 10;
  o.filter = LabelsIn(0, 5);  // 250 items pass
  std::vector<SearchResult> got, exact;
  ASSERT_TRUE(db->Search("c", queries.view(), o, &got).ok());
  o.exhaustive = true;
  ASSERT_TRUE(db->Search("c", queries.view(), o, &exact).ok());
  ExpectAllPass(got, {0, 1, 2, 3, 4});
  EXPECT_GE(RecallAgainst(exact, got), 0.95);
}

// Payload fields: equality on strings and numbers (3 equals 3.0), ANDed
// with each other and with labels; payloads that are not JSON objects never
// pass; items ingested or removed after the first payload search count.
TEST(FilterTest, PayloadFieldEquality) {
  TempDir dir;
  auto db = OpenDb(dir.path());
  const CollectionSpec spec = MakeSpec("c", Kind::kGaussian, 8);
  ASSERT_TRUE(db->CreateCollection(spec).ok());
  Batch b = RandomBatch(spec, 400, 0, 5);
  std::vector<std::string> payloads(400);
  for (int64_t i = 0; i < 400; ++i) {
    const char* color = i % 4 == 0 ? "red" : i % 4 == 1 ? "blue" : "green";
    if (i % 10 == 9) {
      payloads[i] = "not json " + std::to_string(i);
    } else if (i % 10 == 8) {
      payloads[i] = "{\"color\": [\"red\"], \"size\": 3}";  // an array never equals
    } else {
      payloads[i] = "{\"color\": \"" + std::string(color) +
                    "\", \"size\": " + (i % 2 ? "3" : "3.0") + ", \"n\": " + std::to_string(i) +
                    "}";
    }
  }
  IngestBatch ib = b.ingest();
  ib.payloads = payloads.data();
  ASSERT_TRUE(db->Ingest("c", ib, nullptr).ok());
  const Batch queries = QueryBatch(spec, 3, 3);

  auto search = [&](const SearchFilter& f, int k, bool exhaustive) {
    SearchOptions o;
    o.k = k;
    o.filter = f;
    o.exhaustive = exhaustive;
    o.with_payload = true;
    std::vector<SearchResult> r;
    Status s = db->Search("c", queries.view(), o, &r);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return r;
  };
  auto passing_ids = [&](const SearchFilter& f) { return IdsOf(search(f, 1000, false)[0]); };

  SearchFilter red;
  red.payload_equals = {{"color", "\"red\""}};
  std::set<int64_t> expected;
  for (int64_t i = 0; i < 400; ++i) {
    if (i % 4 == 0 && i % 10 < 8) expected.insert(i);
  }
  EXPECT_EQ(passing_ids(red), expected);
  EXPECT_EQ(search(red, 5, false)[0].passing, int64_t(expected.size()));

  SearchFilter size3;
  size3.payload_equals = {{"size", "3"}};
  int64_t with_size = 0;
  for (int64_t i = 0; i < 400; ++i) with_size += (i % 10 != 9);
  EXPECT_EQ(int64_t(passing_ids(size3).size()), with_size);
  size3.payload_equals = {{"size", "3.0"}};
  EXPECT_EQ(int64_t(passing_ids(size3).size()), with_size);
  size3.payload_equals = {{"size", "\"3\""}};  // the string "3" is not the number 3
  EXPECT_TRUE(passing_ids(size3).empty());

  SearchFilter red_label;  // red AND label 0 (ids % 10 == 0)
  red_label.payload_equals = {{"color", "\"red\""}};
  red_label.label_rule = SearchFilter::LabelRule::kIn;
  red_label.labels = {0};
  for (int64_t id : passing_ids(red_label)) EXPECT_EQ(id % 20, 0);
  EXPECT_EQ(passing_ids(red_label).size(), 20u);

  SearchFilter two;  // two payload fields
  two.payload_equals = {{"color", "\"blue\""}, {"n", "41"}};
  EXPECT_EQ(passing_ids(two), std::set<int64_t>({41}));

  // Ingested after the payload index was built, and removed: both seen.
  Batch more = RandomBatch(spec, 2, 1000, 8);
  std::vector<std::string> more_payloads = {"{\"color\": \"red\"}", "{\"color\": \"pink\"}"};
  IngestBatch mb = more.ingest();
  mb.payloads = more_payloads.data();
  ASSERT_TRUE(db->Ingest("c", mb, nullptr).ok());
  const int64_t gone = 0;
  ASSERT_TRUE(db->Remove("c", &gone, 1, nullptr).ok());
  expected.erase(0);
  expected.insert(1000);
  EXPECT_EQ(passing_ids(red), expected);
  // And after a reopen (the index is rebuilt from the stored payloads).
  db.reset();
  db = OpenDb(dir.path());
  EXPECT_EQ(passing_ids(red), expected);
  // Exhaustive search honours the filter too; payloads of hits are theirs.
  const std::vector<SearchResult> exhaustive = search(red, 10, true);
  for (const SearchHit& h : exhaustive[0].hits) {
    EXPECT_NE(h.payload.find("\"red\""), std::string::npos) << h.payload;
  }
}

TEST(FilterTest, NotInPassesItemsWithoutLabel) {
  TempDir dir;
  auto db = OpenDb(dir.path());
  const CollectionSpec spec = MakeSpec("c", Kind::kPoint, 4);
  ASSERT_TRUE(db->CreateCollection(spec).ok());
  Batch labelled = RandomBatch(spec, 10, 0, 1);  // labels 0..9
  Batch unlabelled = RandomBatch(spec, 5, 10, 2);
  unlabelled.labels.clear();
  ASSERT_TRUE(db->Ingest("c", labelled.ingest(), nullptr).ok());
  ASSERT_TRUE(db->Ingest("c", unlabelled.ingest(), nullptr).ok());
  SearchOptions o;
  o.k = 100;
  o.filter.label_rule = SearchFilter::LabelRule::kNotIn;
  o.filter.labels = {0, 1, 2, 3, 4, 5, 6, 7};
  std::vector<SearchResult> r;
  ASSERT_TRUE(db->Search("c", QueryBatch(spec, 1, 4).view(), o, &r).ok());
  EXPECT_EQ(IdsOf(r[0]), std::set<int64_t>({8, 9, 10, 11, 12, 13, 14}));
  o.filter.label_rule = SearchFilter::LabelRule::kIn;  // unlabelled never pass "in"
  ASSERT_TRUE(db->Search("c", QueryBatch(spec, 1, 4).view(), o, &r).ok());
  EXPECT_EQ(r[0].hits.size(), 8u);
  // A filter nothing passes: no hits, passing 0, not an error.
  o.filter.labels = {12345};
  ASSERT_TRUE(db->Search("c", QueryBatch(spec, 1, 4).view(), o, &r).ok());
  EXPECT_TRUE(r[0].hits.empty());
  EXPECT_EQ(r[0].passing, 0);
}

// IngestBatch::has_labels: one batch mixes items with and without a label;
// each keeps its own through get, filters and a reopen (the arena snapshot
// and the records alike), and the per-item flags are part of a token's
// batch.
TEST(FilterTest, PerItemLabelsInOneBatch) {
  TempDir dir;
  auto db = OpenDb(dir.path());
  const CollectionSpec spec = MakeSpec("c", Kind::kPoint, 4);
  ASSERT_TRUE(db->CreateCollection(spec).ok());
  Batch b = RandomBatch(spec, 6, 0, 1);
  b.labels = {3, 99, 3, 99, 5, 99};
  const std::vector<uint8_t> has = {1, 0, 1, 0, 1, 0};
  IngestBatch ib = b.ingest();
  ib.has_labels = has.data();
  ib.token = "mixed";
  ASSERT_TRUE(db->Ingest("c", ib, nullptr).ok());
  IngestResult replay;
  std::vector<int64_t> ids;
  ASSERT_TRUE(db->Ingest("c", ib, &ids, &replay).ok());
  EXPECT_TRUE(replay.replayed);
  IngestBatch all_labelled = b.ingest();  // the same batch without the flags
  all_labelled.token = "mixed";
  EXPECT_TRUE(db->Ingest("c", all_labelled, nullptr).IsInvalidArgument());
  for (int reopen = 0; reopen < 2; ++reopen) {
    SCOPED_TRACE(reopen ? "after a reopen" : "as ingested");
    std::vector<Record> records;
    ASSERT_TRUE(db->Get("c", b.ids.data(), b.ids.size(), &records).ok());
    for (size_t i = 0; i < records.size(); ++i) {
      EXPECT_EQ(records[i].has_label, has[i] != 0) << i;
      if (has[i]) {
        EXPECT_EQ(records[i].label, b.labels[i]);
      }
    }
    SearchOptions o;
    o.k = 10;
    o.filter.label_rule = SearchFilter::LabelRule::kNotIn;
    o.filter.labels = {3};
    std::vector<SearchResult> r;
    ASSERT_TRUE(db->Search("c", QueryBatch(spec, 1, 4).view(), o, &r).ok());
    EXPECT_EQ(IdsOf(r[0]), std::set<int64_t>({1, 3, 4, 5}));
    o.filter.label_rule = SearchFilter::LabelRule::kIn;
    o.filter.labels = {99};  // the ignored labels of unlabelled items
    ASSERT_TRUE(db->Search("c", QueryBatch(spec, 1, 4).view(), o, &r).ok());
    EXPECT_TRUE(r[0].hits.empty());
    db.reset();
    db = OpenDb(dir.path());
  }
}

// A payload is read as JSON for a filter only if all of it is JSON: a
// leading UTF-8 byte-order mark is skipped (RFC 8259 lets a parser do so),
// and a NUL byte (which the parser would take for the end) makes it not
// JSON; the stored payload stays as given.
TEST(FilterTest, PayloadByteOrderMarkAndNulBytes) {
  TempDir dir;
  auto db = OpenDb(dir.path());
  const CollectionSpec spec = MakeSpec("c", Kind::kPoint, 4);
  ASSERT_TRUE(db->CreateCollection(spec).ok());
  Batch b = RandomBatch(spec, 5, 0, 1);
  std::vector<std::string> payloads = {
      "\xEF\xBB\xBF{\"a\":3}", "{\"a\":3}", std::string("{\"a\":3}\0", 8),
      std::string("{\"a\":3}\0{\"b\":1}", 15), "\xEF\xBB\xBF \xEF\xBB\xBF{\"a\":3}"};
  IngestBatch ib = b.ingest();
  ib.payloads = payloads.data();
  ASSERT_TRUE(db->Ingest("c", ib, nullptr).ok());
  for (bool exhaustive : {false, true}) {
    SearchOptions o;
    o.k = 10;
    o.exhaustive = exhaustive;
    o.filter.payload_equals = {{"a", "3"}};
    std::vector<SearchResult> r;
    ASSERT_TRUE(db->Search("c", QueryBatch(spec, 1, 4).view(), o, &r).ok());
    EXPECT_EQ(IdsOf(r[0]), std::set<int64_t>({0, 1}));
    EXPECT_EQ(r[0].passing, 2);
  }
  std::vector<Record> records;
  ASSERT_TRUE(db->Get("c", b.ids.data(), b.ids.size(), &records).ok());
  for (size_t i = 0; i < payloads.size(); ++i) EXPECT_EQ(records[i].payload, payloads[i]);
}

// Ids at the ends of int64 (the dense id table must not overflow), and many
// payload conditions (more than a byte can count).
TEST(FilterTest, ExtremeIdsAndManyConditions) {
  TempDir dir;
  auto db = OpenDb(dir.path());
  const CollectionSpec spec = MakeSpec("c", Kind::kPoint, 4);
  ASSERT_TRUE(db->CreateCollection(spec).ok());
  Batch b = RandomBatch(spec, 3, 0, 1);
  b.ids = {INT64_MAX, INT64_MIN, 0};
  b.labels = {1, 1, 2};
  std::vector<std::string> payloads(3, "{\"a\": 1}");
  IngestBatch ib = b.ingest();
  ib.payloads = payloads.data();
  ASSERT_TRUE(db->Ingest("c", ib, nullptr).ok());
  SearchOptions o;
  o.k = 10;
  o.filter.label_rule = SearchFilter::LabelRule::kIn;
  o.filter.labels = {1};
  std::vector<SearchResult> r;
  ASSERT_TRUE(db->Search("c", QueryBatch(spec, 1, 4).view(), o, &r).ok());
  EXPECT_EQ(IdsOf(r[0]), std::set<int64_t>({INT64_MAX, INT64_MIN}));
  o.filter = SearchFilter();
  for (int c = 0; c < 300; ++c) o.filter.payload_equals.emplace_back("a", "1");
  ASSERT_TRUE(db->Search("c", QueryBatch(spec, 1, 4).view(), o, &r).ok());
  EXPECT_EQ(r[0].passing, 3);
}

TEST(FilterTest, BadFiltersAreRefusedNamingTheProblem) {
  TempDir dir;
  auto db = OpenDb(dir.path());
  const CollectionSpec spec = MakeSpec("c", Kind::kPoint, 4);
  ASSERT_TRUE(db->CreateCollection(spec).ok());
  ASSERT_TRUE(db->Ingest("c", RandomBatch(spec, 10, 0, 1).ingest(), nullptr).ok());
  auto error = [&](const SearchFilter& f) {
    SearchOptions o;
    o.filter = f;
    std::vector<SearchResult> r;
    Status s = db->Search("c", QueryBatch(spec, 1, 4).view(), o, &r);
    EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
    return s.ToString();
  };
  SearchFilter f;
  f.label_rule = SearchFilter::LabelRule::kIn;
  EXPECT_NE(error(f).find("needs at least one label"), std::string::npos);
  f = SearchFilter();
  f.payload_equals = {{"color", "red"}};  // not JSON: a string needs its quotes
  EXPECT_NE(error(f).find("'color'"), std::string::npos);
  f.payload_equals = {{"color", "[1, 2]"}};
  EXPECT_NE(error(f).find("string, number, boolean or null"), std::string::npos);
  f.payload_equals = {{"", "1"}};
  EXPECT_NE(error(f).find("empty field"), std::string::npos);
}

// An unfiltered top k returns min(k, items) hits, as the same search with a
// filter that every item passes does: stage 1 widens when it finds fewer
// live items than k (an HNSW walk that ends early at k = 1000 of 5,000
// items; IVF lists that hold fewer than k = 3000). Before the fix: 813-835
// and 2,677 hits. The hits are the exhaustive top k up to stage 1's recall.
TEST(FilterTest, UnfilteredTopKReturnsKWhenTheCollectionHoldsThatMany) {
  struct Case {
    const char* factory;
    int k;
  };
  for (const Case& c : {Case{"HNSW16", 1000}, Case{"IVF16,Flat", 3000}, Case{"HNSW16", 6000}}) {
    SCOPED_TRACE(std::string(c.factory) + " k=" + std::to_string(c.k));
    TempDir dir;
    auto db = OpenDb(dir.path());
    const CollectionSpec spec = MakeSpec("c", Kind::kPoint, 8, c.factory);
    ASSERT_TRUE(db->CreateCollection(spec).ok());
    const int64_t n = 5000;
    const Batch b = RandomBatch(spec, n, 0, 7);
    ASSERT_TRUE(db->Ingest("c", b.ingest(), nullptr).ok());
    ASSERT_TRUE(db->Flush().ok());
    ASSERT_TRUE(StatsOf(db.get(), "c").index_trained);
    const Batch queries = QueryBatch(spec, 3, 11);
    SearchOptions o;
    o.k = c.k;
    o.with_uncertainty = false;
    std::vector<SearchResult> got, exact, all_pass;
    ASSERT_TRUE(db->Search("c", queries.view(), o, &got).ok());
    o.exhaustive = true;
    ASSERT_TRUE(db->Search("c", queries.view(), o, &exact).ok());
    o.exhaustive = false;
    o.filter.label_rule = SearchFilter::LabelRule::kNotIn;  // no item has label -1
    o.filter.labels = {-1};
    ASSERT_TRUE(db->Search("c", queries.view(), o, &all_pass).ok());
    const size_t want = size_t(std::min<int64_t>(c.k, n));
    for (size_t q = 0; q < got.size(); ++q) {
      EXPECT_EQ(got[q].hits.size(), want);
      EXPECT_EQ(IdsOf(got[q]).size(), got[q].hits.size());  // no id twice
      EXPECT_EQ(all_pass[q].hits.size(), want);
    }
    EXPECT_GE(RecallAgainst(exact, got), 0.9);
  }
}

}  // namespace
}  // namespace testing
}  // namespace hedgedb
