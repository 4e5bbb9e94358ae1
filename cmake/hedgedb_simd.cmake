# The per-ISA kernel files (common/simd_level.h: one SIMD level for every
# kernel family).
#
# On x86-64 with GCC or clang, the files of a level compile with that level's
# flags, and the rest of the core keeps the baseline ISA; the dispatch
# (ForActiveKernelIsa) reaches their functions only after the CPU check.
# Elsewhere they are left out and HEDGEDB_SIMD_X86 is 0: portable code only.
#
# The flags of a level are those its CPU check (common/simd_level.cc,
# CpuSupports) requires, no more: a file may only use what the check covers.
# A family needing more adds it to its own file and checks it itself
# (query/code_topk_avx512.cc: AVX-512 VBMI).
if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64)$"
   AND CMAKE_CXX_COMPILER_ID MATCHES "^(GNU|Clang)$")
  set(HEDGEDB_SIMD_X86 ON)
else()
  set(HEDGEDB_SIMD_X86 OFF)
endif()
set(HEDGEDB_SIMD_AVX2_FLAGS -mavx2 -mfma)
set(HEDGEDB_SIMD_AVX512_FLAGS -mavx512f -mavx512bw -mavx2 -mfma)

# hedgedb_simd_sources(<target> [AVX2 <file>...] [AVX512 <file>...])
#   Adds the files to <target> with their level's flags (x86-64 builds only;
#   call from the directory that defines <target>). Shared helpers in these
#   files must be static or in an anonymous namespace: an inline function or
#   template instance of another linkage compiled with AVX-512 flags could be
#   the copy the linker keeps for baseline callers too
#   (tests/simd/check_isa_objects.cmake checks the objects).
function(hedgedb_simd_sources target)
  cmake_parse_arguments(PARSE_ARGV 1 _arg "" "" "AVX2;AVX512")
  if(NOT HEDGEDB_SIMD_X86)
    return()
  endif()
  target_sources(${target} PRIVATE ${_arg_AVX2} ${_arg_AVX512})
  set_source_files_properties(${_arg_AVX2} PROPERTIES COMPILE_OPTIONS "${HEDGEDB_SIMD_AVX2_FLAGS}")
  set_source_files_properties(${_arg_AVX512} PROPERTIES
    COMPILE_OPTIONS "${HEDGEDB_SIMD_AVX512_FLAGS}")
endfunction()
