// hedgedb --read-only beside a writer: a child process (this test binary,
// re-run on the ReadOnlyCliChild test) holds the database open for writing
// through the library and writes a batch, while bin/hedgedb reads it.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/cli_test_util.h"
#include "engine/child_process.h"
#include "hedgedb/db.h"
#include "hedgedb/npy.h"

namespace hedgedb {
namespace {

namespace fs = std::filesystem;
using cli_testing::CliRun;
using cli_testing::DescribeRun;
using cli_testing::JsonLines;
using cli_testing::Lowercase;

constexpr int64_t kDim = 4;

// Item i of the collection: a point of its own.
std::vector<float> ItemVectors(int64_t first, int64_t n) {
  std::vector<float> v;
  for (int64_t i = first; i < first + n; ++i) {
    for (int64_t j = 0; j < kDim; ++j) v.push_back(0.5f * float(i) + 0.25f * float(j));
  }
  return v;
}

// Runs only inside the child: opens the database for writing, ingests items
// 10..19, says so on the ack pipe, and holds the database until the command
// pipe closes.
TEST(ReadOnlyCliChild, HoldOpen) {
  const char* db_path = std::getenv("HEDGEDB_CLI_HOLD_DB");
  const char* cmd_fd_text = std::getenv("HEDGEDB_CLI_HOLD_CMD_FD");
  const char* ack_fd_text = std::getenv("HEDGEDB_CLI_HOLD_ACK_FD");
  if (!db_path || !cmd_fd_text || !ack_fd_text) GTEST_SKIP() << "only runs as a test's child";
  std::unique_ptr<DB> db;
  if (!DB::Open(Options(), db_path, &db).ok()) std::abort();
  const std::vector<float> vec = ItemVectors(10, 10);
  IngestBatch batch;
  batch.data.n = 10;
  batch.data.vec = vec.data();
  std::vector<int64_t> ids;
  if (!db->Ingest("c", batch, &ids).ok() || ids.front() != 10) std::abort();
  const char ready = 'r';
  if (::write(std::atoi(ack_fd_text), &ready, 1) != 1) std::abort();
  char ignored;
  while (::read(std::atoi(cmd_fd_text), &ignored, 1) > 0) {
  }
}

class ReadOnlyCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "hedgedb_ro_cli.XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
    db_ = dir_ + "/db";
  }
  void TearDown() override { fs::remove_all(dir_); }

  CliRun Run(const std::vector<std::string>& args) { return cli_testing::RunHedgedb(dir_, args); }
  nlohmann::json Ok(const std::vector<std::string>& args) {
    const CliRun r = Run(args);
    EXPECT_EQ(r.exit_code, 0) << DescribeRun(args, r);
    const std::vector<nlohmann::json> lines = JsonLines(r.out, /*strict=*/false);
    return lines.empty() ? nlohmann::json() : lines.front();
  }
  void Fails(const std::vector<std::string>& args, const std::vector<std::string>& needles) {
    const CliRun r = Run(args);
    EXPECT_EQ(r.exit_code, 1) << DescribeRun(args, r);
    for (const std::string& needle : needles) {
      EXPECT_NE(Lowercase(r.err).find(Lowercase(needle)), std::string::npos)
          << "missing '" << needle << "' in\n"
          << DescribeRun(args, r);
    }
  }
  std::string WriteVectors(const std::string& name, int64_t first, int64_t n) {
    const std::string path = dir_ + "/" + name;
    EXPECT_TRUE(WriteNpy(path, MakeNpy(ItemVectors(first, n), {n, kDim})).ok());
    return path;
  }

  std::string dir_, db_;
};

TEST_F(ReadOnlyCliTest, ReadCommandsRunBesideAWriterWithReadOnly) {
  Ok({"create", "--db", db_, "--collection", "c", "--kind", "point", "--dim", "4"});
  Ok({"ingest", "--db", db_, "--collection", "c", "--vec", WriteVectors("first.npy", 0, 10)});

  int cmd[2], ack[2];
  ASSERT_EQ(::pipe(cmd), 0);
  ASSERT_EQ(::pipe(ack), 0);
  const pid_t pid = testing::SpawnSelf(
      {"--gtest_filter=ReadOnlyCliChild.HoldOpen"},
      {"HEDGEDB_CLI_HOLD_DB=" + db_, "HEDGEDB_CLI_HOLD_CMD_FD=" + std::to_string(cmd[0]),
       "HEDGEDB_CLI_HOLD_ACK_FD=" + std::to_string(ack[1])},
      cmd[1]);
  ASSERT_GT(pid, 0);
  ::close(cmd[0]);
  ::close(ack[1]);
  char ready = 0;
  ASSERT_EQ(::read(ack[0], &ready, 1), 1) << "the writer did not start";

  const std::string query = WriteVectors("query.npy", 15, 1);
  const std::vector<std::string> search = {"search", "--db", db_, "--collection", "c", "--vec",
                                           query,    "--k",  "1"};
  // Without --read-only: locked, and the hint names the flag.
  Fails(search,
        {"database " + db_ + " is locked by another process (pid " + std::to_string(pid) + ")",
         "--read-only"});
  Fails({"ingest", "--db", db_, "--collection", "c", "--vec", query},
        {"locked by another process", "stop that process first"});

  std::vector<std::string> ro_search = search;
  ro_search.push_back("--read-only");
  const nlohmann::json hit = Ok(ro_search);
  ASSERT_EQ(hit["results"].size(), 1u) << hit.dump();
  EXPECT_EQ(hit["results"][0]["id"], 15);  // written by the process that holds the database
  EXPECT_EQ(Ok({"stats", "--db", db_, "--collection", "c", "--read-only"})["items"], 20);
  EXPECT_EQ(Ok({"list", "--db", db_, "--read-only"})["collections"], nlohmann::json::array({"c"}));
  const nlohmann::json item =
      Ok({"get", "--db", db_, "--collection", "c", "--id", "19", "--read-only"});
  EXPECT_EQ(item["found"], true);
  const nlohmann::json backup = Ok({"backup", "--db", db_, "--to", dir_ + "/bk", "--read-only"});
  EXPECT_EQ(backup["collections"][0]["items"], 20);
  EXPECT_EQ(Ok({"stats", "--db", dir_ + "/bk", "--collection", "c"})["items"], 20);

  ::close(cmd[1]);  // the writer closes the database and exits
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  ::close(ack[0]);
  // --read-only works on a database nobody holds, too.
  EXPECT_EQ(Ok({"stats", "--db", db_, "--collection", "c", "--read-only"})["items"], 20);
}

}  // namespace
}  // namespace hedgedb
