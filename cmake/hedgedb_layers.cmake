# The core's layers as a build fact (the rules: top-level CMakeLists.txt and
# docs/design.md, "Layers").
#
# hedgedb_core_layer(<layer> [SEES <lower layer>...])
#   Makes the OBJECT library hedgedb_<layer> (its sources are added by
#   <layer>/CMakeLists.txt) and its include view,
#   ${CMAKE_BINARY_DIR}/layer_include/<layer>/: a directory of symbolic links
#   to <layer>/ and the lower layers it may include. Includes are
#   root-relative ("storage/record_store.h"), so the view takes the place of
#   the repository root on the layer's include path: a header of a layer
#   outside it is "No such file" (tests/layering/ shows it). The lower layers
#   are linked PRIVATE, for their usage requirements (third-party headers);
#   object libraries link no objects into each other.
function(hedgedb_core_layer layer)
  cmake_parse_arguments(PARSE_ARGV 1 _arg "" "" "SEES")
  set(_view ${CMAKE_BINARY_DIR}/layer_include/${layer})
  # Rebuilt on every configure, so a layer taken off SEES disappears from the
  # view. file(REMOVE) takes a link away without following it.
  file(GLOB _old LIST_DIRECTORIES true ${_view}/*)
  if(_old)
    file(REMOVE ${_old})
  endif()
  file(MAKE_DIRECTORY ${_view})
  foreach(_dir ${layer} ${_arg_SEES})
    file(CREATE_LINK ${CMAKE_SOURCE_DIR}/${_dir} ${_view}/${_dir} SYMBOLIC)
  endforeach()

  set(_target hedgedb_${layer})
  add_library(${_target} OBJECT)
  # Compiled once for both hedgedb (shared: exports only HEDGEDB_EXPORT) and
  # hedgedb_internal (static).
  set_target_properties(${_target} PROPERTIES
    CXX_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON)
  target_include_directories(${_target}
    PUBLIC $<BUILD_INTERFACE:${CMAKE_SOURCE_DIR}/include>
    PRIVATE ${_view})
  foreach(_lower ${_arg_SEES})
    target_link_libraries(${_target} PRIVATE hedgedb_${_lower})
  endforeach()
  # Every object of the core compiles with -fopenmp, as when the core was one
  # library, so the split changes no object's flags (index and query use
  # OpenMP themselves).
  target_link_libraries(${_target} PRIVATE OpenMP::OpenMP_CXX PUBLIC Threads::Threads)
endfunction()
