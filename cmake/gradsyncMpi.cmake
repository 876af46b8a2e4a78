# gradsync::mpi: gradsync plus MPI (transport::Mpi, collective "mpi"), when MPI is found and
# GRADSYNC_ENABLE_MPI is on. Everything MPI in this build checks `TARGET gradsync::mpi`.
if(GRADSYNC_ENABLE_MPI)
  set(MPI_CXX_SKIP_MPICXX ON)  # the C API is all gradsync uses; the project enables only CXX
  find_package(MPI COMPONENTS CXX)
  if(MPI_CXX_FOUND)
    add_library(gradsync_mpi INTERFACE)
    add_library(gradsync::mpi ALIAS gradsync_mpi)
    target_link_libraries(gradsync_mpi INTERFACE gradsync MPI::MPI_CXX)
    target_compile_definitions(gradsync_mpi INTERFACE GRADSYNC_WITH_MPI=1)
    # mpiexec flags for this machine: root needs --allow-run-as-root; few cores need --oversubscribe.
    set(GRADSYNC_MPIEXEC_FLAGS ${MPIEXEC_PREFLAGS} --oversubscribe)
    execute_process(COMMAND id -u OUTPUT_VARIABLE _gradsync_uid OUTPUT_STRIP_TRAILING_WHITESPACE)
    if(_gradsync_uid STREQUAL "0")
      list(APPEND GRADSYNC_MPIEXEC_FLAGS --allow-run-as-root)
    endif()
  else()
    message(STATUS "gradsync: MPI not found; MPI transport, tests and benchmarks are skipped")
  endif()
endif()
