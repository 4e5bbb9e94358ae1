// The SIMD levels a test can force (common/simd_level.h): every level up to
// the one this build and CPU support, and a guard that forces one and puts
// the previous level back.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/simd_level.h"

namespace hedgedb {
namespace testing_util {

inline std::vector<KernelIsa> SupportedKernelIsas() {
  std::vector<KernelIsa> isas;
  for (int i = 0; i <= static_cast<int>(DetectKernelIsa()); ++i) {
    isas.push_back(static_cast<KernelIsa>(i));
  }
  return isas;
}

// For INSTANTIATE_TEST_SUITE_P: the level's name.
inline std::string KernelIsaParamName(const ::testing::TestParamInfo<KernelIsa>& info) {
  return KernelIsaName(info.param);
}

class ScopedKernelIsa {
 public:
  // ok() is false if the level cannot be forced here.
  explicit ScopedKernelIsa(KernelIsa isa) : saved_(ActiveKernelIsa()), ok_(SetKernelIsa(isa)) {}
  ~ScopedKernelIsa() { SetKernelIsa(saved_); }
  ScopedKernelIsa(const ScopedKernelIsa&) = delete;
  ScopedKernelIsa& operator=(const ScopedKernelIsa&) = delete;
  bool ok() const { return ok_; }

 private:
  KernelIsa saved_;
  bool ok_;
};

}  // namespace testing_util
}  // namespace hedgedb
