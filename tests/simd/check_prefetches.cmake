# The objects whose hot loops prefetch scattered rows hold prefetch
# instructions: the id map's lookups (query/id_map.h, inlined into
# searcher.cc) and the kernels' candidate rows (query/kernels_impl.h, in
# every level's kernels file). GCC 12 silently drops a __builtin_prefetch
# that stands alone under an `if`, and did so twice here: the search still
# gave the right answers, 15-30% slower (bench/RESULTS.md).
#
#   cmake -DOBJDUMP=<objdump> -DOBJECTS=<object>|<object>... -P check_prefetches.cmake
string(REPLACE "|" ";" _objects "${OBJECTS}")
list(FILTER _objects INCLUDE REGEX "/(searcher|kernels|kernels_avx2|kernels_avx512)\\.cc\\.o(bj)?$")
list(LENGTH _objects _count)
if(_count LESS 2)
  message(FATAL_ERROR "searcher and kernels objects not found among ${OBJECTS}")
endif()
set(_bad "")
foreach(_object ${_objects})
  execute_process(COMMAND ${OBJDUMP} -d --no-show-raw-insn ${_object} OUTPUT_VARIABLE _code
                  RESULT_VARIABLE _rc)
  if(NOT _rc EQUAL 0)
    message(FATAL_ERROR "${OBJDUMP} failed on ${_object}")
  endif()
  string(REGEX MATCHALL "prefetch(t0|t1|t2|nta)" _found "${_code}")
  list(LENGTH _found _n)
  message(STATUS "${_object}: ${_n} prefetch instructions")
  if(_n EQUAL 0)
    string(APPEND _bad "  ${_object}\n")
  endif()
endforeach()
if(NOT _bad STREQUAL "")
  message(FATAL_ERROR "no prefetch instruction in:\n${_bad}")
endif()
