// The one SIMD level of the process: which instruction set every kernel family
// runs (the Monte Carlo and eta kernels, the closed-form score sums, the
// DIMCO code scan and its top-k pre-scan in query/, the nearest-centroid
// minimum and the list scan's L2 rows in index/).
//
// Each family has a portable version and, on x86-64 built with GCC or clang,
// versions in per-ISA source files compiled with that level's flags
// (cmake/hedgedb_simd.cmake). Code compiled with those flags runs only after
// the dispatch below has checked the CPU, so a family picks its version from
// ActiveKernelIsa() on every call, and SetKernelIsa(kPortable) makes all of
// them run their portable code (the per-ISA tests rely on it).
//
// A family that needs a feature beyond its level falls back on its own:
// the code top-k pre-scan needs AVX-512 VBMI besides kAvx512 and runs only
// where the CPU has it (query/code_topk.cc).
#pragma once

namespace hedgedb {

// Ordered: a level includes the ones before it.
//   kAvx2:   AVX2 and FMA.
//   kAvx512: kAvx2 plus AVX-512 F and BW.
enum class KernelIsa { kPortable, kAvx2, kAvx512 };

const char* KernelIsaName(KernelIsa isa);
// Whether this build has the level's code (x86-64 with GCC or clang for the
// x86 levels; the portable level always).
bool KernelIsaBuilt(KernelIsa isa);
// Best level this build has and this CPU (and its OS) supports.
KernelIsa DetectKernelIsa();
// Level the kernels currently use (DetectKernelIsa() unless overridden).
KernelIsa ActiveKernelIsa();
// Forces a level this build has and the CPU supports (tests, benchmarks);
// returns false otherwise. Takes effect at each family's next call.
bool SetKernelIsa(KernelIsa isa);

// The version of a function for the active level: `avx512` at kAvx512,
// `avx2` at kAvx2 and above, else `portable`. A level whose version is
// nullptr falls to the one below. The x86 arguments must be nullptr in a build
// without the x86 files (HEDGEDB_SIMD_X86 below).
template <typename Fn>
Fn ForActiveKernelIsa(Fn portable, Fn avx2, Fn avx512) {
  switch (ActiveKernelIsa()) {
    case KernelIsa::kAvx512:
      if (avx512 != nullptr) return avx512;
      [[fallthrough]];
    case KernelIsa::kAvx2:
      if (avx2 != nullptr) return avx2;
      [[fallthrough]];
    default:
      return portable;
  }
}

}  // namespace hedgedb

// 1 where the build compiles the x86 per-ISA files (cmake/hedgedb_simd.cmake
// decides; common/CMakeLists.txt passes it to the layers, the top-level
// CMakeLists.txt to hedgedb_internal's users), else 0. Use HEDGEDB_SIMD_X86_ONLY(x)
// for a pointer to an x86 version: x there, nullptr elsewhere.
#ifndef HEDGEDB_SIMD_X86
#define HEDGEDB_SIMD_X86 0
#endif
#if HEDGEDB_SIMD_X86
#define HEDGEDB_SIMD_X86_ONLY(x) (x)
#else
#define HEDGEDB_SIMD_X86_ONLY(x) nullptr
#endif
