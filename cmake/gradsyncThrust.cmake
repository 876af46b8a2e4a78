# Thrust headers for the codec kernels (host systems with g++; the CUDA system under nvcc).
# Looks in the CUDA toolkit's CCCL first (/usr/local/cuda/include/cccl: Thrust + libcu++ side by
# side), then Debian's libthrust-dev (/usr/include). Defines gradsync::thrust, an INTERFACE
# target with that include directory (SYSTEM, so Thrust's own warnings stay out of our builds).
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

