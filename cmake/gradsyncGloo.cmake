# gradsync::gloo: gradsync plus Gloo (collective "gloo": Gloo's ring all-reduce with blocking waits),
# when Debian's libgloo-dev (or another Gloo package config) is found and GRADSYNC_ENABLE_GLOO is
# not off. Read by the build (CMakeLists.txt) and by the installed package config.
include_guard(GLOBAL)
if(DEFINED GRADSYNC_ENABLE_GLOO AND NOT GRADSYNC_ENABLE_GLOO)
  return()
endif()
include(${CMAKE_CURRENT_LIST_DIR}/gradsyncOptionalTarget.cmake)
gradsync_optional_package(gloo GRADSYNC_WITH_GLOO gloo
                          "Gloo not found (Debian: libgloo-dev); collective 'gloo' (gradsync::gloo) is not available"
                          Gloo CONFIG)
