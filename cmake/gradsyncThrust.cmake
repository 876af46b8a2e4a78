# Thrust headers for the codec kernels (host systems with g++; the CUDA system under nvcc).
# Looks in the CUDA toolkit's CCCL first (/usr/local/cuda/include/cccl: Thrust + libcu++ side by
# side), then Debian's libthrust-dev (/usr/include). Defines gradsync::thrust, an INTERFACE
# IMPORTED target with that include directory (SYSTEM, as every imported target's: Thrust's own
# warnings stay out of our builds); gradsync::gradsync links it, in the build and in a package.
include_guard(GLOBAL)

find_package(CUDAToolkit QUIET)
set(_gradsync_thrust_hints /usr/local/cuda/include/cccl /usr/local/cuda/include)
foreach(dir IN LISTS CUDAToolkit_INCLUDE_DIRS)
  list(PREPEND _gradsync_thrust_hints ${dir}/cccl ${dir})
endforeach()
find_path(GRADSYNC_THRUST_INCLUDE_DIR thrust/version.h HINTS ${_gradsync_thrust_hints}
          DOC "directory holding thrust/version.h (CUDA toolkit CCCL or libthrust-dev)")
if(NOT GRADSYNC_THRUST_INCLUDE_DIR)
  message(FATAL_ERROR "gradsync: the codecs need Thrust headers: install the CUDA toolkit or "
                      "Debian's libthrust-dev, or set GRADSYNC_THRUST_INCLUDE_DIR")
endif()
message(STATUS "gradsync: Thrust headers in ${GRADSYNC_THRUST_INCLUDE_DIR}")
if(NOT TARGET gradsync::thrust)
  # GLOBAL in the build tree, so a parent project that add_subdirectory()s gradsync sees it too.
  if(CMAKE_FIND_PACKAGE_NAME STREQUAL "gradsync")
    add_library(gradsync::thrust INTERFACE IMPORTED)
  else()
    add_library(gradsync::thrust INTERFACE IMPORTED GLOBAL)
  endif()
  set_target_properties(gradsync::thrust PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${GRADSYNC_THRUST_INCLUDE_DIR}")
endif()
