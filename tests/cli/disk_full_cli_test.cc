// `hedgedb ingest` on a full file system (a small tmpfs): exit code != 0 and
// a message naming the lack of space; the database keeps what it had and takes
// the batch once space is back.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "cli/cli_test_util.h"
#include "hedgedb/npy.h"
#include "temp_dir.h"
#include "tmpfs_mount.h"

namespace hedgedb {
namespace {

using cli_testing::CliRun;
using cli_testing::DescribeRun;
using cli_testing::JsonLines;
using cli_testing::RunHedgedb;

class DiskFullCliTest : public testing_util::TempDirTest {};

// Writes zeros to `path` until the file system is full.
void FillUp(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  std::vector<char> block(64 * 1024, 0);
  while (std::fwrite(block.data(), 1, block.size(), f) == block.size()) {
  }
  std::fclose(f);
}

TEST_F(DiskFullCliTest, IngestOnAFullDiskFailsClearlyAndKeepsTheDatabase) {
  testing_util::ScopedTmpfs fs;
  const std::string why = fs.Mount("8m");
  if (!why.empty()) GTEST_SKIP() << why;
  const std::string db = fs.path() + "/db";
  auto run = [&](const std::vector<std::string>& args) { return RunHedgedb(dir_, args); };
  std::vector<std::string> args = {"create", "--db",  db,  "--collection", "c",   "--kind",
                                   "point",  "--dim", "8", "--index",      "Flat"};
  CliRun r = run(args);
  ASSERT_EQ(r.exit_code, 0) << DescribeRun(args, r);

  NpyArray vec;
  vec.shape = {500, 8};
  std::vector<float> values(500 * 8);
  for (size_t i = 0; i < values.size(); ++i) values[i] = float(i % 97) * 0.25f;
  vec.bytes.resize(values.size() * sizeof(float));
  std::memcpy(vec.bytes.data(), values.data(), vec.bytes.size());
  ASSERT_TRUE(WriteNpy(Path("vec.npy"), vec).ok());
  const std::vector<std::string> ingest = {"ingest", "--db",         db, "--collection", "c",
                                           "--vec",  Path("vec.npy")};
  r = run(ingest);
  ASSERT_EQ(r.exit_code, 0) << DescribeRun(ingest, r);

  const std::string filler = fs.path() + "/filler";
  FillUp(filler);
  r = run(ingest);
  EXPECT_NE(r.exit_code, 0) << DescribeRun(ingest, r);
  EXPECT_LT(r.exit_code, 128) << "killed by a signal: " << DescribeRun(ingest, r);
  EXPECT_NE(r.err.find("No space left on device"), std::string::npos) << DescribeRun(ingest, r);

  std::remove(filler.c_str());
  const std::vector<std::string> stats = {"stats", "--db", db, "--collection", "c"};
  r = run(stats);
  ASSERT_EQ(r.exit_code, 0) << DescribeRun(stats, r);
  EXPECT_EQ(JsonLines(r.out, true).at(0).value("items", int64_t{-1}), 500) << r.out;
  r = run(ingest);
  EXPECT_EQ(r.exit_code, 0) << DescribeRun(ingest, r);
  r = run(stats);
  EXPECT_EQ(JsonLines(r.out, true).at(0).value("items", int64_t{-1}), 1000) << r.out;
}

}  // namespace
}  // namespace hedgedb
