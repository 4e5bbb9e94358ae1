# The step the tests/simd checks share: the object files they read, from
# OBJECTS as the test passes them ("|"-separated: add_test would split a ";"
# list into arguments), kept where the name matches `regex`. Stops the check
# (FATAL_ERROR "<missing> among <OBJECTS>") when fewer than `min` match, so
# that a renamed file cannot make a check pass by reading nothing.
#
#   include(${CMAKE_CURRENT_LIST_DIR}/select_objects.cmake)
#   hedgedb_select_objects(<out-list> <regex> <min> <missing>)
function(hedgedb_select_objects out regex min missing)
  string(REPLACE "|" ";" _selected "${OBJECTS}")
  list(FILTER _selected INCLUDE REGEX "${regex}")
  list(LENGTH _selected _count)
  if(_count LESS ${min})
    message(FATAL_ERROR "${missing} among ${OBJECTS}")
  endif()
  set(${out} "${_selected}" PARENT_SCOPE)
endfunction()
