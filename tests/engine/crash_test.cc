// Crash safety: a child process ingests batches and is killed with SIGKILL at
// a random moment; every acknowledged batch must be there after reopening, and
// no batch may be there in part.
//
// The child is this same test binary, re-run with --gtest_filter on the
// CrashChild test and told through environment variables where to write and
// which pipe to acknowledge batches on.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <map>
#include <random>
#include <string>
#include <thread>

#include "child_process.h"
#include "engine_test_util.h"

namespace hedgedb {
namespace {

using testing::MakeSpec;
using testing::RandomBatch;
using testing::TempDir;

constexpr int64_t kBatchItems = 200;
constexpr int kDim = 16;

// Runs only inside the child (the environment says so).
TEST(CrashChild, IngestUntilKilled) {
  const char* db_path = std::getenv("HEDGEDB_CRASH_DB");
  const char* ack_fd_text = std::getenv("HEDGEDB_CRASH_ACK_FD");
  if (!db_path || !ack_fd_text) GTEST_SKIP() << "only runs as the crash test's child";
  const int ack_fd = std::atoi(ack_fd_text);
  std::unique_ptr<DB> db;
  ASSERT_TRUE(DB::Open(Options(), db_path, &db).ok());
  CollectionSpec spec = MakeSpec("c", Kind::kGaussian, kDim);
  for (int64_t batch = 0;; ++batch) {
    testing::Batch b = RandomBatch(spec, kBatchItems, batch * kBatchItems, uint64_t(batch));
    Status s = db->Ingest("c", b.ingest(), nullptr);
    if (!s.ok()) std::abort();
    // Acknowledge only after Ingest returned: from here on the batch must survive.
    int64_t ack = batch;
    if (::write(ack_fd, &ack, sizeof(ack)) != sizeof(ack)) std::abort();
  }
}

TEST(CrashTest, SigkillLosesNoAcknowledgedBatchAndLeavesNoPartialOne) {
  std::mt19937 rng(12345);
  for (int round = 0; round < 3; ++round) {
    TempDir dir;
    {
      std::unique_ptr<DB> db;
      ASSERT_TRUE(DB::Open(Options(), dir.path(), &db).ok());
      ASSERT_TRUE(db->CreateCollection(MakeSpec("c", Kind::kGaussian, kDim, "Flat")).ok());
    }
    int fds[2];
    ASSERT_EQ(::pipe(fds), 0);
    const pid_t pid = testing::SpawnSelf(
        {"--gtest_filter=CrashChild.IngestUntilKilled"},
        {"HEDGEDB_CRASH_DB=" + dir.path(), "HEDGEDB_CRASH_ACK_FD=" + std::to_string(fds[1])},
        fds[0]);
    ASSERT_GT(pid, 0);
    ::close(fds[1]);

    // Wait for a few acknowledgements, then kill at a random moment.
    const int wait_acks = 3 + int(rng() % 5);
    int64_t last_ack = -1, ack;
    while (last_ack + 1 < wait_acks && ::read(fds[0], &ack, sizeof(ack)) == sizeof(ack)) {
      last_ack = ack;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(rng() % 20000));
    const int status = testing::KillAndReap(pid);
    ASSERT_NE(status, -1);
    ASSERT_TRUE(WIFSIGNALED(status)) << "the child ended by itself (status " << status << ")";
    // Acks written before the kill are still in the pipe.
    while (::read(fds[0], &ack, sizeof(ack)) == sizeof(ack)) last_ack = ack;
    ::close(fds[0]);
    ASSERT_GE(last_ack, wait_acks - 1);

    std::unique_ptr<DB> db;
    Status s = DB::Open(Options(), dir.path(), &db);
    ASSERT_TRUE(s.ok()) << s.ToString();
    CollectionStats st;
    ASSERT_TRUE(db->GetStats("c", &st).ok());
    ASSERT_EQ(st.items % kBatchItems, 0) << "a partial batch survived";
    const int64_t batches = st.items / kBatchItems;
    EXPECT_GE(batches, last_ack + 1) << "an acknowledged batch was lost";
    EXPECT_LE(batches, last_ack + 2);  // at most one written but not yet acknowledged
    // The surviving batches are exactly batches 0..batches-1, with their data.
    std::vector<int64_t> ids;
    for (int64_t i = 0; i < batches * kBatchItems; ++i) ids.push_back(i);
    ids.push_back(batches * kBatchItems);  // first id of the first lost batch
    std::vector<Record> recs;
    ASSERT_TRUE(db->Get("c", ids.data(), ids.size(), &recs).ok());
    for (int64_t i = 0; i < batches * kBatchItems; ++i) ASSERT_TRUE(recs[i].found) << i;
    EXPECT_FALSE(recs.back().found);
    testing::Batch last = RandomBatch(MakeSpec("c", Kind::kGaussian, kDim), kBatchItems,
                                      (batches - 1) * kBatchItems, uint64_t(batches - 1));
    EXPECT_EQ(recs[(batches - 1) * kBatchItems].mean,
              std::vector<float>(last.mean.begin(), last.mean.begin() + kDim));
    EXPECT_EQ(st.index_vectors, st.items);  // index caught up / rebuilt from the records
  }
}

}  // namespace
}  // namespace hedgedb
