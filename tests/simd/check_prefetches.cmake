# The hot loops that read scattered memory keep their prefetch instructions:
# the id map's lookups of stage-1 candidates (query/id_map.h, in
# Searcher::CandidateRows, searcher.cc) and the kernels' candidate rows
# (query/kernels_impl.h, in every level's kernels object), and the list
# scan's next tile and next list (index/list_scan.cc), and the code top-k's
# pre-scan (query/code_topk_avx512.cc). GCC 12 takes a
# function whose only effect is a prefetch for a pure one and deletes the
# calls it did not inline early: the search still gives the right answers,
# 15-30% slower (bench/RESULTS.md, "Batched mls"). The helpers are always
# inlined now; this check keeps it so.
#
#   cmake -DOBJDUMP=<objdump> -DOBJECTS=<object>|<object>... -P check_prefetches.cmake
if(NOT OBJDUMP)
  message(FATAL_ERROR "no objdump (CMAKE_OBJDUMP is empty): cannot look for prefetches")
endif()
include(${CMAKE_CURRENT_LIST_DIR}/select_objects.cmake)
hedgedb_select_objects(
  _objects "/(searcher|kernels|kernels_avx2|kernels_avx512|list_scan|code_topk_avx512)\\.cc\\.o(bj)?$" 4
  "searcher, kernels, list scan and code top-k objects not found")
set(_bad "")
foreach(_object ${_objects})
  execute_process(COMMAND ${OBJDUMP} -d -C --no-show-raw-insn ${_object} OUTPUT_VARIABLE _code
                  RESULT_VARIABLE _rc)
  if(NOT _rc EQUAL 0)
    message(FATAL_ERROR "${OBJDUMP} failed on ${_object}")
  endif()
  if(_object MATCHES "/searcher\\.cc\\.o(bj)?$")
    # Only CandidateRows' own code (its one prefetch site is in its loop):
    # each of its symbols (clones, cold parts) from the header to the blank
    # line that ends it in objdump's listing.
    set(_rest "${_code}")
    set(_code "")
    foreach(_symbol RANGE 32)  # CandidateRows has a few symbols (clones, cold parts)
      string(FIND "${_rest}" " <hedgedb::query::Searcher::CandidateRows(" _at)
      if(_at EQUAL -1)
        break()
      endif()
      string(SUBSTRING "${_rest}" ${_at} -1 _rest)
      string(FIND "${_rest}" "\n\n" _end)
      string(SUBSTRING "${_rest}" 0 ${_end} _part)
      string(APPEND _code "${_part}")
      if(_end EQUAL -1)
        break()
      endif()
      string(SUBSTRING "${_rest}" ${_end} -1 _rest)
    endforeach()
    set(_where "${_object} (Searcher::CandidateRows)")
  else()
    set(_where "${_object}")
  endif()
  string(REGEX MATCHALL "prefetch(t0|t1|t2|nta)" _found "${_code}")
  list(LENGTH _found _n)
  message(STATUS "${_where}: ${_n} prefetch instructions")
  if(_n EQUAL 0)
    string(APPEND _bad "  ${_where}\n")
  endif()
endforeach()
if(NOT _bad STREQUAL "")
  message(FATAL_ERROR "no prefetch instruction in:\n${_bad}")
endif()
