// Helpers shared by the engine tests: temp directories, opened databases and
// (from batches.h) generated batches.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "batches.h"
#include "hedgedb/db.h"

namespace hedgedb {
namespace testing {

// A fresh directory, removed with its contents at scope exit.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "hedgedb-test-XXXXXX").string();
    path_ = ::mkdtemp(&tmpl[0]);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Opens (creating) the database at `path`; a failure fails the test.
inline std::unique_ptr<DB> OpenDb(const std::string& path, Options options = Options()) {
  std::unique_ptr<DB> db;
  Status s = DB::Open(options, path, &db);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return db;
}

// The collection's stats; a failure fails the test.
inline CollectionStats StatsOf(DB* db, const std::string& name) {
  CollectionStats st;
  Status s = db->GetStats(name, &st);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return st;
}

}  // namespace testing
}  // namespace hedgedb
