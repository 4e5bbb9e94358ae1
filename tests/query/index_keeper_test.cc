// IndexKeeper (query/index_keeper.h) over a RowTable, with real FAISS
// indexes and index files: appended rows reach a trained index, the index
// trains (and tunes) once the live rows cross its training size, retired ids
// leave an IVF and stay as tombstones in an HNSW graph (rebuilt at a save
// once they are the majority), a saved file loads back as the same index and
// a file behind the rows is caught up, a file ahead of the records is lost
// writes, and a stale index takes nothing and is never saved again.
#include "query/index_keeper.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "common/row_layout.h"
#include "temp_dir.h"
#include "test_rows.h"

namespace hedgedb {
namespace query {
namespace {

constexpr uint64_t kBinding = 0x5eed;
constexpr int kDim = 8;

storage::CollectionMeta MetaFor(const std::string& factory) {
  storage::CollectionMeta meta;
  meta.spec.name = "k";
  meta.spec.kind = Kind::kGaussian;
  meta.spec.dim = kDim;
  meta.spec.index_factory = factory;
  return meta;
}

class IndexKeeperTest : public testing_util::TempDirTest {
 protected:
  // n new items with the next ids, written by the next batch: the rows go
  // into the table and meta advances, as Collection does after a commit.
  // Returns the packed rows and ids (what Ingest hands to Sync).
  void Append(int64_t n, storage::CollectionMeta* meta, RowTable* table,
              std::vector<uint8_t>* batch_rows = nullptr,
              std::vector<int64_t>* batch_ids = nullptr) {
    const RowShape shape = RowShapeOf(meta->spec);
    const std::vector<float> rows = testing_rows::RandomRows(shape, size_t(n), 0, &rng_, 3.0f);
    meta->sequence += 1;
    const size_t bytes = shape.item_row_bytes();
    const auto* p = reinterpret_cast<const uint8_t*>(rows.data());
    if (batch_rows) batch_rows->assign(p, p + size_t(n) * bytes);
    if (batch_ids) batch_ids->clear();
    for (int64_t i = 0; i < n; ++i) {
      const int64_t id = ++meta->max_id;
      table->Append(id, false, 0, p + size_t(i) * bytes, meta->sequence);
      if (batch_ids) batch_ids->push_back(id);
    }
  }

  // An upsert of an existing id: its old row retired, a new one appended.
  void Upsert(int64_t id, storage::CollectionMeta* meta, RowTable* table, IndexKeeper* keeper) {
    const RowShape shape = RowShapeOf(meta->spec);
    const std::vector<float> row = testing_rows::RandomRow(shape, &rng_, 3.0f);
    meta->sequence += 1;
    table->Retire({id});
    keeper->Retire({id});
    table->Append(id, false, 0, reinterpret_cast<const uint8_t*>(row.data()), meta->sequence);
  }

  static std::vector<int64_t> LiveIds(const RowTable& table) {
    std::vector<int64_t> ids;
    for (int64_t r : table.live_rows()) ids.push_back(table.ids()[size_t(r)]);
    std::sort(ids.begin(), ids.end());
    return ids;
  }

  static std::vector<int64_t> IndexIds(const IndexKeeper& keeper) {
    std::vector<int64_t> ids;
    EXPECT_TRUE(keeper.index().Ids(&ids).ok());
    std::sort(ids.begin(), ids.end());
    return ids;
  }

  // The stage-1 candidates of the first `nq` live rows used as queries (a
  // gaussian query row is laid out as an item row).
  static std::vector<int64_t> Candidates(const IndexKeeper& keeper, const RowTable& table,
                                         int64_t nq) {
    std::vector<uint8_t> rows;
    std::vector<int64_t> ids;
    table.GatherLive(&rows, &ids, 0);
    std::vector<int64_t> labels;
    EXPECT_TRUE(keeper.index()
                    .Search(reinterpret_cast<const float*>(rows.data()), nq, 20, {}, &labels)
                    .ok());
    return labels;
  }

  static uint64_t FileSequence(const storage::CollectionMeta& meta, const std::string& path) {
    std::unique_ptr<index::CoarseIndex> loaded;
    uint64_t sequence = 0;
    EXPECT_TRUE(index::CoarseIndex::Load(meta.spec, path, kBinding, &loaded, &sequence).ok());
    return sequence;
  }

  std::mt19937_64 rng_{7};
};

TEST_F(IndexKeeperTest, SyncAddsAppendsAndTrainsAtTheTrainingSize) {
  storage::CollectionMeta meta = MetaFor("IVF16,Flat");
  RowTable table(ItemRowBytes(meta.spec));
  IndexKeeper keeper(&meta, &table, Path("k.hidx"), kBinding, 0);
  Append(300, &meta, &table);
  ASSERT_TRUE(keeper.Open().ok());
  // No file: built from the rows, too few to train (IVF16 wants 39 * 16).
  EXPECT_EQ(keeper.open_mode(), "rebuilt");
  EXPECT_EQ(keeper.note(), "");  // a missing file is not worth a note
  EXPECT_FALSE(keeper.trained());
  EXPECT_EQ(keeper.index().train_rows_wanted(), 39 * 16);
  EXPECT_EQ(keeper.index().ntotal(), 0);
  EXPECT_EQ(keeper.saved_sequence(), meta.sequence);  // saved untrained
  EXPECT_FALSE(keeper.TrainDue());

  // Past the training size: a write's Sync does not train, Train does.
  int64_t first = table.rows();
  Append(400, &meta, &table);
  ASSERT_TRUE(keeper.Sync(first, /*train=*/false).ok());
  EXPECT_FALSE(keeper.trained());
  EXPECT_TRUE(keeper.TrainDue());
  ASSERT_TRUE(keeper.Train().ok());
  EXPECT_TRUE(keeper.trained());
  EXPECT_FALSE(keeper.TrainDue());
  EXPECT_EQ(keeper.index().ntotal(), 700);
  EXPECT_EQ(keeper.indexed_rows(), 700);
  EXPECT_EQ(keeper.unsaved_vectors(), 700);
  EXPECT_EQ(IndexIds(keeper), LiveIds(table));
  // Tuned when trained: nprobe fitted, the recall it reached measured.
  EXPECT_TRUE(std::isfinite(keeper.index().recall_estimate()));
  EXPECT_GE(keeper.index().recall_estimate(), 0.0);
  EXPECT_LE(keeper.index().recall_estimate(), 1.0);

  // Appends: the batch as packed (Ingest) and gathered from the table.
  std::vector<uint8_t> batch_rows;
  std::vector<int64_t> batch_ids;
  first = table.rows();
  Append(50, &meta, &table, &batch_rows, &batch_ids);
  ASSERT_TRUE(keeper.Sync(first, false, batch_rows.data(), batch_ids.data()).ok());
  EXPECT_EQ(keeper.index().ntotal(), 750);
  first = table.rows();
  Append(50, &meta, &table);
  ASSERT_TRUE(keeper.Sync(first, false).ok());
  EXPECT_EQ(keeper.index().ntotal(), 800);
  EXPECT_EQ(keeper.indexed_rows(), 800);
  EXPECT_EQ(IndexIds(keeper), LiveIds(table));
  // Each item is its own best candidate (all lists probed: exact).
  std::vector<uint8_t> rows;
  std::vector<int64_t> ids;
  table.GatherLive(&rows, &ids, 0);
  std::vector<int64_t> labels;
  index::CoarseSearchKnobs all;
  all.nprobe = 16;
  ASSERT_TRUE(keeper.index()
                  .Search(reinterpret_cast<const float*>(rows.data()), 100, 1, all, &labels)
                  .ok());
  for (int64_t q = 0; q < 100; ++q) EXPECT_EQ(labels[size_t(q)], ids[size_t(q)]);

  CollectionStats stats;
  keeper.FillStats(&stats);
  EXPECT_EQ(stats.index_vectors, 800);
  EXPECT_TRUE(stats.index_trained);
  EXPECT_FALSE(stats.index_stale);
  EXPECT_EQ(stats.index_description, "IVF16,Flat");
  EXPECT_EQ(stats.spec.index_factory, "IVF16,Flat");
  EXPECT_EQ(stats.index_nprobe, keeper.index().default_knobs().nprobe);
  EXPECT_EQ(stats.index_sequence, 1u);
}

TEST_F(IndexKeeperTest, RetireRemovesFromIvfAndLeavesTombstonesInHnsw) {
  {
    storage::CollectionMeta meta = MetaFor("IVF16,Flat");
    RowTable table(ItemRowBytes(meta.spec));
    IndexKeeper keeper(&meta, &table, Path("ivf.hidx"), kBinding, 0);
    Append(700, &meta, &table);
    ASSERT_TRUE(keeper.Open().ok());
    ASSERT_TRUE(keeper.trained());  // trained by the rebuild: enough rows
    const std::vector<int64_t> gone = {3, 10, 400, 699};
    table.Retire(gone);
    keeper.Retire(gone);
    EXPECT_EQ(keeper.index().ntotal(), 696);  // physical removal
    EXPECT_EQ(keeper.tombstones(), 0);
    EXPECT_EQ(keeper.unsaved_vectors(), 4);
    EXPECT_EQ(IndexIds(keeper), LiveIds(table));
  }
  storage::CollectionMeta meta = MetaFor("HNSW16");
  RowTable table(ItemRowBytes(meta.spec));
  IndexKeeper keeper(&meta, &table, Path("hnsw.hidx"), kBinding, 0);
  Append(200, &meta, &table);
  ASSERT_TRUE(keeper.Open().ok());
  EXPECT_TRUE(keeper.trained());  // a graph needs no training
  EXPECT_EQ(keeper.index().ntotal(), 200);
  std::vector<int64_t> gone;
  for (int64_t id = 0; id < 90; ++id) gone.push_back(id);
  table.Retire(gone);
  keeper.Retire(gone);
  EXPECT_EQ(keeper.index().ntotal(), 200);  // the vectors stay
  EXPECT_EQ(keeper.tombstones(), 90);
  // At most half tombstones: saved as it is.
  meta.sequence += 1;
  ASSERT_TRUE(keeper.Save().ok());
  EXPECT_EQ(keeper.tombstones(), 90);
  EXPECT_EQ(keeper.saved_sequence(), meta.sequence);
  // More than half: the save rebuilds from the live rows first.
  gone.clear();
  for (int64_t id = 90; id < 120; ++id) gone.push_back(id);
  table.Retire(gone);
  keeper.Retire(gone);
  EXPECT_EQ(keeper.tombstones(), 120);
  meta.sequence += 1;
  ASSERT_TRUE(keeper.Save().ok());
  EXPECT_EQ(keeper.tombstones(), 0);
  EXPECT_EQ(keeper.index().ntotal(), 80);
  EXPECT_EQ(IndexIds(keeper), LiveIds(table));
  EXPECT_EQ(FileSequence(meta, Path("hnsw.hidx")), meta.sequence);
}

TEST_F(IndexKeeperTest, SavedFileLoadsBackAndIsCaughtUp) {
  storage::CollectionMeta meta = MetaFor("IVF16,Flat");
  RowTable table(ItemRowBytes(meta.spec));
  const std::string path = Path("k.hidx");
  std::vector<int64_t> candidates;
  index::CoarseSearchKnobs knobs;
  double recall = 0;
  {
    IndexKeeper keeper(&meta, &table, path, kBinding, 0);
    Append(800, &meta, &table);
    ASSERT_TRUE(keeper.Open().ok());
    ASSERT_TRUE(keeper.trained());
    EXPECT_EQ(keeper.saved_sequence(), meta.sequence);
    EXPECT_EQ(keeper.unsaved_vectors(), 0);
    candidates = Candidates(keeper, table, 50);
    knobs = keeper.index().default_knobs();
    recall = keeper.index().recall_estimate();
  }
  {
    // The same sequence: loaded as saved, the same candidates.
    IndexKeeper keeper(&meta, &table, path, kBinding, 0);
    ASSERT_TRUE(keeper.Open().ok());
    EXPECT_EQ(keeper.open_mode(), "loaded");
    EXPECT_EQ(keeper.note(), "");
    EXPECT_EQ(keeper.index().ntotal(), 800);
    EXPECT_EQ(keeper.indexed_rows(), 800);
    EXPECT_EQ(keeper.index().default_knobs().nprobe, knobs.nprobe);
    EXPECT_EQ(keeper.index().recall_estimate(), recall);
    EXPECT_EQ(Candidates(keeper, table, 50), candidates);

    // Writes after the save (new items, an upsert, a removal): not saved.
    Append(30, &meta, &table);
    Upsert(5, &meta, &table, &keeper);
    table.Retire({6});
    keeper.Retire({6});
    meta.sequence += 1;
  }
  const uint64_t behind = FileSequence(meta, path);
  EXPECT_EQ(behind, 1u);
  {
    // Caught up: the file's vectors of rewritten ids replaced, new rows
    // added, removed ones tombstones; then saved at the records' sequence.
    IndexKeeper keeper(&meta, &table, path, kBinding, 0);
    ASSERT_TRUE(keeper.Open().ok());
    EXPECT_EQ(keeper.open_mode(), "caught-up");
    // The file's 800 - its id 5 + the 31 rows written since (30 new, id 5
    // again); id 6 was removed after the save and stays as the one tombstone.
    EXPECT_EQ(keeper.index().ntotal(), 830);
    EXPECT_EQ(table.live_count(), 829);
    EXPECT_EQ(keeper.tombstones(), 1);
    EXPECT_EQ(keeper.saved_sequence(), meta.sequence);
    EXPECT_EQ(keeper.unsaved_vectors(), 0);
  }
  EXPECT_EQ(FileSequence(meta, path), meta.sequence);
}

TEST_F(IndexKeeperTest, FileAheadOfTheRecordsIsLostWrites) {
  storage::CollectionMeta meta = MetaFor("IVF16,Flat");
  RowTable table(ItemRowBytes(meta.spec));
  const std::string path = Path("k.hidx");
  Append(700, &meta, &table);
  {
    IndexKeeper keeper(&meta, &table, path, kBinding, 0);
    ASSERT_TRUE(keeper.Open().ok());
    meta.sequence += 2;  // two writes that the records then lose
    ASSERT_TRUE(keeper.Save().ok());
  }
  meta.sequence -= 2;
  {
    IndexKeeper keeper(&meta, &table, path, kBinding, 0);
    ASSERT_TRUE(keeper.Open().ok());
    EXPECT_EQ(keeper.open_mode(), "rebuilt");
    EXPECT_NE(keeper.lost_writes().find("covered sequence 3, the store has 1"), std::string::npos)
        << keeper.lost_writes();
    EXPECT_NE(keeper.note().find("rebuilt from the records"), std::string::npos);
    EXPECT_EQ(keeper.index().ntotal(), 700);
  }
  EXPECT_EQ(FileSequence(meta, path), 1u);  // rewritten at the records' sequence
  {
    // A reader meeting a file ahead of its view rebuilds in memory: no lost
    // writes, nothing saved.
    meta.sequence += 2;
    {
      IndexKeeper writer(&meta, &table, path, kBinding, 0);
      ASSERT_TRUE(writer.Open().ok());
      ASSERT_TRUE(writer.Save().ok());
    }
    meta.sequence -= 2;
    IndexKeeper reader(&meta, &table, path, kBinding, 0);
    reader.SetReadOnly();
    ASSERT_TRUE(reader.Open().ok());
    EXPECT_EQ(reader.open_mode(), "rebuilt");
    EXPECT_EQ(reader.lost_writes(), "");
    EXPECT_EQ(reader.Save().code(), Status::Code::kNotSupported);
    EXPECT_EQ(FileSequence(meta, path), 3u);
  }
  // A file of another collection (binding) is not trusted.
  IndexKeeper other(&meta, &table, path, kBinding + 1, 0);
  ASSERT_TRUE(other.Open().ok());
  EXPECT_EQ(other.open_mode(), "rebuilt");
  EXPECT_NE(other.note(), "");
}

TEST_F(IndexKeeperTest, StaleIndexTakesNothingAndIsNeverSaved) {
  storage::CollectionMeta meta = MetaFor("IVF16,Flat");
  RowTable table(ItemRowBytes(meta.spec));
  const std::string path = Path("k.hidx");
  IndexKeeper keeper(&meta, &table, path, kBinding, /*save_interval=*/10);
  Append(700, &meta, &table);
  ASSERT_TRUE(keeper.Open().ok());
  ASSERT_TRUE(keeper.trained());
  // SaveIfDue: after 10 changed vectors.
  int64_t first = table.rows();
  Append(5, &meta, &table);
  ASSERT_TRUE(keeper.Sync(first, false).ok());
  ASSERT_TRUE(keeper.SaveIfDue().ok());
  EXPECT_EQ(keeper.saved_sequence(), 1u);
  first = table.rows();
  Append(5, &meta, &table);
  ASSERT_TRUE(keeper.Sync(first, false).ok());
  ASSERT_TRUE(keeper.SaveIfDue().ok());
  EXPECT_EQ(keeper.saved_sequence(), meta.sequence);
  const uint64_t saved = meta.sequence;

  // A FAISS failure on add marks it stale and is returned.
  first = table.rows();
  Append(5, &meta, &table);
  index::CoarseIndex::FailNextAddsForTest(1);
  EXPECT_FALSE(keeper.Sync(first, false).ok());
  EXPECT_TRUE(keeper.stale());
  EXPECT_EQ(keeper.note().rfind("stale: ", 0), 0u) << keeper.note();
  EXPECT_EQ(keeper.index().ntotal(), 710);
  // From now on: no adds, no removals, no save (OK, the file stays behind).
  first = table.rows();
  Append(20, &meta, &table);
  EXPECT_TRUE(keeper.Sync(first, false).ok());
  table.Retire({1, 2});
  keeper.Retire({1, 2});
  EXPECT_EQ(keeper.index().ntotal(), 710);
  EXPECT_TRUE(keeper.Save().ok());
  EXPECT_TRUE(keeper.SaveIfDue().ok());
  EXPECT_EQ(keeper.saved_sequence(), saved);
  EXPECT_EQ(FileSequence(meta, path), saved);
  CollectionStats stats;
  keeper.FillStats(&stats);
  EXPECT_TRUE(stats.index_stale);
  EXPECT_EQ(stats.index_note, keeper.note());

  // MarkStale says why; the next open catches the old file up.
  IndexKeeper reopened(&meta, &table, path, kBinding, 0);
  ASSERT_TRUE(reopened.Open().ok());
  EXPECT_EQ(reopened.open_mode(), "caught-up");
  EXPECT_FALSE(reopened.stale());
  EXPECT_EQ(reopened.index().ntotal(), table.live_count() + 2);  // ids 1, 2 in the file
  EXPECT_EQ(reopened.tombstones(), 2);
  reopened.MarkStale("test reason");
  EXPECT_TRUE(reopened.stale());
  EXPECT_EQ(reopened.note(),
            "stale: test reason; searches score every item exactly until the next open "
            "rebuilds the index");
}

TEST_F(IndexKeeperTest, GraphIsTunedAtItsFirstSaveWithEnoughRows) {
  storage::CollectionMeta meta = MetaFor("HNSW16");
  RowTable table(ItemRowBytes(meta.spec));
  const std::string path = Path("k.hidx");
  IndexKeeper keeper(&meta, &table, path, kBinding, 0);
  Append(500, &meta, &table);
  ASSERT_TRUE(keeper.Open().ok());  // saved, but too few rows to tune
  EXPECT_TRUE(std::isnan(keeper.index().recall_estimate()));
  const int default_ef = keeper.index().default_knobs().ef_search;
  const int64_t first = table.rows();
  Append(700, &meta, &table);
  ASSERT_TRUE(keeper.Sync(first, false).ok());
  EXPECT_TRUE(std::isnan(keeper.index().recall_estimate()));  // adds do not tune
  ASSERT_TRUE(keeper.Save().ok());
  const double recall = keeper.index().recall_estimate();
  ASSERT_TRUE(std::isfinite(recall));
  EXPECT_GE(recall, 0.0);
  EXPECT_LE(recall, 1.0);
  const int ef = keeper.index().default_knobs().ef_search;
  EXPECT_GE(ef, default_ef);  // the ladder starts at the static default
  // The fitted knob and its recall are saved with the index.
  IndexKeeper reopened(&meta, &table, path, kBinding, 0);
  ASSERT_TRUE(reopened.Open().ok());
  EXPECT_EQ(reopened.open_mode(), "loaded");
  EXPECT_EQ(reopened.index().recall_estimate(), recall);
  EXPECT_EQ(reopened.index().default_knobs().ef_search, ef);
  // And the fitted candidates (at least the 10 x k it starts from).
  EXPECT_GE(keeper.index().default_oversampling(), 10);
  EXPECT_EQ(reopened.index().default_oversampling(), keeper.index().default_oversampling());
  EXPECT_EQ(reopened.index().coarse_recall(), keeper.index().coarse_recall());
}

}  // namespace
}  // namespace query
}  // namespace hedgedb
