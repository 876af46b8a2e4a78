# Dependencies of the gradsync headers themselves (shared by the build and the package config).
find_package(Threads REQUIRED)
find_package(Boost 1.74 REQUIRED)  # Boost.Lockfree is header-only
include(${CMAKE_CURRENT_LIST_DIR}/gradsyncThrust.cmake)  # codec kernels run through Thrust
