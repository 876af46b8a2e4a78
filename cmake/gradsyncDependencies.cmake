# Dependencies of the gradsync headers themselves: the one list, read by the build (CMakeLists.txt)
# and by the installed package config (gradsyncConfig.cmake), which finds them again for a consumer.
# In the package config a missing one makes find_package(gradsync) fail with its name (find_dependency);
# in the build it is an error.
if(CMAKE_FIND_PACKAGE_NAME STREQUAL "gradsync")
  include(CMakeFindDependencyMacro)
  macro(_gradsync_need)
    find_dependency(${ARGV})
  endmacro()
else()
  macro(_gradsync_need)
    find_package(${ARGV} REQUIRED)
  endmacro()
endif()
_gradsync_need(Threads)
_gradsync_need(Boost 1.74)  # Boost.Lockfree is header-only
include(${CMAKE_CURRENT_LIST_DIR}/gradsyncThrust.cmake)  # codec kernels run through Thrust: gradsync::thrust
