# gradsync::mpi: gradsync plus MPI (transport::Mpi, collective "mpi"), when MPI is found and
# GRADSYNC_ENABLE_MPI is not off. The one definition, read by the build (CMakeLists.txt) and by the
# installed package config. Everything MPI in this build checks `TARGET gradsync::mpi`.
include_guard(GLOBAL)
if(DEFINED GRADSYNC_ENABLE_MPI AND NOT GRADSYNC_ENABLE_MPI)
  return()
endif()
set(MPI_CXX_SKIP_MPICXX ON)  # the C API is all gradsync uses; the project enables only CXX
find_package(MPI QUIET COMPONENTS CXX)
if(NOT MPI_CXX_FOUND)
  message(STATUS "gradsync: MPI not found; the MPI transport (gradsync::mpi) is not available")
  return()
endif()
include(${CMAKE_CURRENT_LIST_DIR}/gradsyncOptionalTarget.cmake)
gradsync_optional_target(mpi GRADSYNC_WITH_MPI MPI::MPI_CXX)
# mpiexec flags for this machine: root needs --allow-run-as-root; few cores need --oversubscribe.
set(GRADSYNC_MPIEXEC_FLAGS ${MPIEXEC_PREFLAGS} --oversubscribe)
execute_process(COMMAND id -u OUTPUT_VARIABLE _gradsync_uid OUTPUT_STRIP_TRAILING_WHITESPACE)
if(_gradsync_uid STREQUAL "0")
  list(APPEND GRADSYNC_MPIEXEC_FLAGS --allow-run-as-root)
endif()
