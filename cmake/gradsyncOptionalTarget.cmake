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

# gradsync_optional_package(NAME DEFINITION TARGET MISSING PACKAGE [find_package args...]):
# gradsync::NAME over TARGET when find_package(PACKAGE ...) provides it; else the status message
# MISSING. A macro: the package's variables stay visible to the caller.
macro(gradsync_optional_package name definition target missing package)
  find_package(${package} ${ARGN} QUIET)
  if(${package}_FOUND AND TARGET ${target})
    gradsync_optional_target(${name} ${definition} ${target})
  else()
    message(STATUS "gradsync: ${missing}")
  endif()
endmacro()
