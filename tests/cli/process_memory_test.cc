// KeepFreedMemoryForReuse (tools/process_memory.h): after it, a large block
// comes from the heap rather than a mapping of its own, and stays in the
// process once freed; the user's own malloc tuning, or HEDGEDB_MALLOC=glibc,
// leaves glibc's settings alone. Each case runs in a forked child, so the
// settings it makes never reach the other tests.
#include "tools/process_memory.h"

#include <gtest/gtest.h>
#include <malloc.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <initializer_list>

#include "tests/sanitizer.h"

namespace hedgedb {
namespace cli {
namespace {

constexpr size_t kBlock = size_t(64) << 20;  // above glibc's largest mmap threshold

void ClearMallocEnvironment() {
  for (const char* name : {"HEDGEDB_MALLOC", "MALLOC_MMAP_MAX_", "MALLOC_MMAP_THRESHOLD_",
                           "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_", "GLIBC_TUNABLES"}) {
    unsetenv(name);
  }
}

// In the child: 0 where `kept` says how the block was held (not mapped, and
// its bytes still free in the heap after free), else a code naming the fault.
int AllocateAndFree(bool want_kept) {
  const size_t mapped_before = mallinfo2().hblks;
  char* block = static_cast<char*>(std::malloc(kBlock));
  if (block == nullptr) return 10;
  std::memset(block, 1, kBlock);  // touch it: the pages exist
  const bool mapped = mallinfo2().hblks > mapped_before;
  std::free(block);
  const bool kept = mallinfo2().fordblks >= kBlock;
  if (want_kept) return mapped ? 11 : kept ? 0 : 12;
  return mapped ? 0 : 13;
}

class ProcessMemoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (testing_util::kSanitized) GTEST_SKIP() << "the sanitizer replaces malloc";
    GTEST_FLAG_SET(death_test_style, "threadsafe");
  }
};

TEST_F(ProcessMemoryTest, LargeBlocksComeFromTheHeapAndStayThereWhenFreed) {
  EXPECT_EXIT(
      {
        ClearMallocEnvironment();
        if (!KeepFreedMemoryForReuse()) std::_Exit(9);
        std::_Exit(AllocateAndFree(/*want_kept=*/true));
      },
      ::testing::ExitedWithCode(0), "");
}

TEST_F(ProcessMemoryTest, WithoutItALargeBlockIsMappedOnItsOwn) {
  // The control: glibc's defaults map such a block, so the test above
  // measures the setting and not the allocator's habits.
  EXPECT_EXIT(
      {
        ClearMallocEnvironment();
        std::_Exit(AllocateAndFree(/*want_kept=*/false));
      },
      ::testing::ExitedWithCode(0), "");
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
          std::_Exit(AllocateAndFree(/*want_kept=*/false));
        },
        ::testing::ExitedWithCode(0), "")
        << setting[0] << "=" << setting[1];
  }
  // Tunables of other parts of glibc are not a malloc tuning.
  EXPECT_EXIT(
      {
        ClearMallocEnvironment();
        setenv("GLIBC_TUNABLES", "glibc.cpu.hwcaps=-AVX512F", 1);
        std::_Exit(KeepFreedMemoryForReuse() ? AllocateAndFree(/*want_kept=*/true) : 9);
      },
      ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace cli
}  // namespace hedgedb
