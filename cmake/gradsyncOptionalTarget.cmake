# gradsync_optional_target(NAME DEFINITION LIB...): gradsync::NAME, gradsync plus LIB... compiled
# with DEFINITION=1 (gradsync::mpi, gradsync::gloo). Imported in a consumer's package config;
# global in the build tree, so a parent project that add_subdirectory()s gradsync sees it.
include_guard(GLOBAL)
function(gradsync_optional_target name definition)
  if(TARGET gradsync::${name})
    return()
  endif()
  if(CMAKE_FIND_PACKAGE_NAME STREQUAL "gradsync")
    add_library(gradsync::${name} INTERFACE IMPORTED)
  else()
    add_library(gradsync::${name} INTERFACE IMPORTED GLOBAL)
  endif()
  target_link_libraries(gradsync::${name} INTERFACE gradsync::gradsync ${ARGN})
  target_compile_definitions(gradsync::${name} INTERFACE ${definition}=1)
endfunction()
