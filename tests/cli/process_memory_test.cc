// KeepFreedMemoryForReuse (tools/process_memory.h): after it, a block the
// size of a training step's activations comes from the heap rather than a
// mapping of its own and stays in the process once freed, and so does a
// block above glibc's largest mmap threshold (an episode's layer); the
// user's own malloc tuning, or HEDGEDB_MALLOC=glibc, leaves glibc's settings
// alone. Each case runs in a child process (a death test), so the settings
// it makes never reach the other tests. glibc reads its own environment at
// start-up only: the variables a case sets change what the function reads,
// not how glibc behaves.
#include "tools/process_memory.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdlib>
#include <cstring>
#include <initializer_list>

#include "tests/sanitizer.h"

#ifdef __GLIBC__
#include <malloc.h>
#endif

namespace hedgedb {
namespace cli {
namespace {

#ifdef __GLIBC__
constexpr size_t kActivations = size_t(24) << 20;  // one CNN layer at batch 128
constexpr size_t kHuge = size_t(140) << 20;        // an episode's layer, above any mmap threshold

void ClearMallocEnvironment() {
  for (const char* name : kGlibcMallocVariables) unsetenv(name);
  unsetenv("HEDGEDB_MALLOC");
  unsetenv("GLIBC_TUNABLES");
}

enum Want { kKept, kMapped };

// In the child: 0 where a block of `bytes` was held as `want` says (kept:
// not mapped, and its bytes still free in the heap after free; mapped: a
// mapping of its own), else a code naming the fault.
int AllocateAndFree(size_t bytes, Want want) {
  const size_t mapped_before = mallinfo2().hblks;
  char* block = static_cast<char*>(std::malloc(bytes));
  if (block == nullptr) return 10;
  std::memset(block, 1, bytes);  // touch it: the pages exist
  const bool mapped = mallinfo2().hblks > mapped_before;
  std::free(block);
  const bool kept = mallinfo2().fordblks >= bytes;
  if (want == kKept) return mapped ? 11 : kept ? 0 : 12;
  return mapped ? 0 : 13;
}
#endif

class ProcessMemoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
#ifndef __GLIBC__
    GTEST_SKIP() << "the setting is glibc's";
#endif
    if (testing_util::kSanitized) GTEST_SKIP() << "the sanitizer replaces malloc";
    // The control cases need glibc's defaults in this process.
    if (MallocTunedByUser()) GTEST_SKIP() << "the environment tunes glibc's malloc";
    GTEST_FLAG_SET(death_test_style, "threadsafe");
  }
};

#ifdef __GLIBC__
TEST_F(ProcessMemoryTest, ActivationSizedBlocksComeFromTheHeapAndStayThereWhenFreed) {
  EXPECT_EXIT(
      {
        ClearMallocEnvironment();
        if (!KeepFreedMemoryForReuse()) std::_Exit(9);
        // Twice: the second block reuses the first's pages.
        const int first = AllocateAndFree(kActivations, kKept);
        std::_Exit(first != 0 ? first : AllocateAndFree(kActivations, kKept));
      },
      ::testing::ExitedWithCode(0), "");
}

TEST_F(ProcessMemoryTest, BlocksAboveTheLargestThresholdAreKeptToo) {
  EXPECT_EXIT(
      {
        ClearMallocEnvironment();
        if (!KeepFreedMemoryForReuse()) std::_Exit(9);
        const int first = AllocateAndFree(kHuge, kKept);
        std::_Exit(first != 0 ? first : AllocateAndFree(kHuge, kKept));
      },
      ::testing::ExitedWithCode(0), "");
}

TEST_F(ProcessMemoryTest, WithoutItSuchBlocksAreMappedOnTheirOwn) {
  // The control: glibc's defaults map the first such block, so the tests
  // above measure the setting and not the allocator's habits.
  for (const size_t bytes : {kActivations, kHuge}) {
    EXPECT_EXIT(
        {
          ClearMallocEnvironment();
          std::_Exit(AllocateAndFree(bytes, kMapped));
        },
        ::testing::ExitedWithCode(0), "")
        << bytes << " bytes";
  }
}

TEST_F(ProcessMemoryTest, TheUsersOwnTuningOrHedgedbMallocGlibcLeavesMallocAlone) {
  const char* settings[][2] = {{"HEDGEDB_MALLOC", "glibc"},
                               {"MALLOC_MMAP_MAX_", "65536"},
                               {"MALLOC_MMAP_THRESHOLD_", "131072"},
                               {"MALLOC_TRIM_THRESHOLD_", "131072"},
                               {"MALLOC_TOP_PAD_", "0"},
                               {"GLIBC_TUNABLES", "glibc.malloc.mmap_max=65536"}};
  for (const auto& setting : settings) {
    EXPECT_EXIT(
        {
          ClearMallocEnvironment();
          setenv(setting[0], setting[1], 1);
          if (KeepFreedMemoryForReuse()) std::_Exit(9);
          std::_Exit(AllocateAndFree(kActivations, kMapped));
        },
        ::testing::ExitedWithCode(0), "")
        << setting[0] << "=" << setting[1];
  }
  // Tunables of other parts of glibc are not a malloc tuning.
  EXPECT_EXIT(
      {
        ClearMallocEnvironment();
        setenv("GLIBC_TUNABLES", "glibc.cpu.hwcaps=-AVX512F", 1);
        std::_Exit(KeepFreedMemoryForReuse() ? AllocateAndFree(kActivations, kKept) : 9);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST_F(ProcessMemoryTest, AnotherValueOfHedgedbMallocIsIgnoredWithAWarning) {
  EXPECT_EXIT(
      {
        ClearMallocEnvironment();
        setenv("HEDGEDB_MALLOC", "jemalloc", 1);
        std::_Exit(KeepFreedMemoryForReuse() ? AllocateAndFree(kActivations, kKept) : 9);
      },
      ::testing::ExitedWithCode(0), "HEDGEDB_MALLOC=jemalloc ignored");
}
#endif

}  // namespace
}  // namespace cli
}  // namespace hedgedb
