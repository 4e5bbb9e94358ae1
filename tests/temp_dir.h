// A gtest fixture with a fresh temporary directory per test, removed after
// it: Path("x") names a file inside it.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <string>

namespace hedgedb {
namespace testing_util {

class TempDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (std::filesystem::temp_directory_path() / "hedgedb_test.XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string Path(const std::string& name) const {
    return (std::filesystem::path(dir_) / name).string();
  }

  std::string dir_;
};

}  // namespace testing_util
}  // namespace hedgedb
