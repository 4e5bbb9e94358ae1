#include "common/simd_level.h"

#include <atomic>

namespace hedgedb {
namespace {

bool CpuSupports(KernelIsa isa) {
  switch (isa) {
    case KernelIsa::kPortable:
      return true;
#if HEDGEDB_SIMD_X86
    // __builtin_cpu_supports (GCC and clang) also checks that the OS saves
    // the wider registers.
    case KernelIsa::kAvx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case KernelIsa::kAvx512:
      return CpuSupports(KernelIsa::kAvx2) && __builtin_cpu_supports("avx512f") &&
             __builtin_cpu_supports("avx512bw");
#endif
    default:
      return false;
  }
}

// -1: not chosen yet.
std::atomic<int> g_active_isa{-1};

}  // namespace

const char* KernelIsaName(KernelIsa isa) {
  switch (isa) {
    case KernelIsa::kPortable:
      return "portable";
    case KernelIsa::kAvx2:
      return "avx2";
    case KernelIsa::kAvx512:
      return "avx512";
  }
  return "unknown";
}

bool KernelIsaBuilt(KernelIsa isa) { return isa == KernelIsa::kPortable || HEDGEDB_SIMD_X86; }

KernelIsa DetectKernelIsa() {
  if (CpuSupports(KernelIsa::kAvx512)) return KernelIsa::kAvx512;
  if (CpuSupports(KernelIsa::kAvx2)) return KernelIsa::kAvx2;
  return KernelIsa::kPortable;
}

KernelIsa ActiveKernelIsa() {
  int isa = g_active_isa.load(std::memory_order_relaxed);
  if (isa < 0) {
    // A SetKernelIsa that ran meanwhile wins over the detected level.
    const int detected = static_cast<int>(DetectKernelIsa());
    isa = -1;
    if (g_active_isa.compare_exchange_strong(isa, detected, std::memory_order_relaxed)) {
      isa = detected;
    }
  }
  return static_cast<KernelIsa>(isa);
}

bool SetKernelIsa(KernelIsa isa) {
  if (!CpuSupports(isa)) return false;
  g_active_isa.store(static_cast<int>(isa), std::memory_order_relaxed);
  return true;
}

}  // namespace hedgedb
