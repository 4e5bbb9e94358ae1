# The per-ISA files (cmake/hedgedb_simd.cmake) define nothing the linker could
# share with baseline code: no weak or unique symbols (inline functions,
# template instances, vague-linkage data), only their own strong entry points.
# A weak function compiled with -mavx512f could be the copy the linker keeps
# for every caller, and would then run on CPUs without AVX-512.
#
#   cmake -DNM=<nm> -DOBJECTS=<object>|<object>... -P check_isa_objects.cmake
include(${CMAKE_CURRENT_LIST_DIR}/select_objects.cmake)
hedgedb_select_objects(_objects "_avx(2|512)\\.cc\\.o(bj)?$" 1 "no per-ISA objects")
list(LENGTH _objects _count)
set(_bad "")
foreach(_object ${_objects})
  execute_process(COMMAND ${NM} --defined-only ${_object} OUTPUT_VARIABLE _symbols
                  RESULT_VARIABLE _rc)
  if(NOT _rc EQUAL 0)
    message(FATAL_ERROR "${NM} failed on ${_object}")
  endif()
  string(REPLACE "\n" ";" _lines "${_symbols}")
  foreach(_line ${_lines})
    # Types: W/w/V/v weak, u unique global, i indirect function. The
    # personality reference of exception tables is data the compiler emits
    # the same way everywhere.
    if(_line MATCHES " [WwVvui] " AND NOT _line MATCHES "DW\\.ref\\.__gxx_personality_v0")
      string(APPEND _bad "  ${_object}: ${_line}\n")
    endif()
  endforeach()
endforeach()
if(_bad)
  message(FATAL_ERROR "per-ISA objects define shared symbols (static or an anonymous namespace "
                      "keeps them to their file):\n${_bad}")
endif()
message(STATUS "${_count} per-ISA objects define only their own entry points")
