# gradsync_any_library(OUT [BACKEND...]): sets OUT to a static library holding the one
# instantiation of AnySynchronizer (src/any_synchronizer.cpp) built with the optional backends
# named that this build has (mpi, gloo: the gradsync::<backend> targets), made on first use.
# A program linking it includes any_synchronizer.hpp as before and compiles none of the engine,
# collectives or codecs behind it. The backends change AnyCollective, so each set has its own
# library, and a program whose own set differs fails to compile (any_synchronizer.hpp's
# static_assert) instead of linking a different AnyCollective. NCCL's collectives need nvcc's
# build: programs with gradsync::nccl instantiate AnySynchronizer themselves.
include_guard(GLOBAL)
function(gradsync_any_library out)
  set(backends "")
  set(name gradsync_any)
  set(libs "")
  foreach(backend mpi gloo)  # the order of AnyCollective::backends
    if(backend IN_LIST ARGN AND TARGET gradsync::${backend})
      string(APPEND backends "${backend},")
      string(APPEND name "_${backend}")
      list(APPEND libs gradsync::${backend})
    endif()
  endforeach()
  if(NOT TARGET ${name})
    add_library(${name} STATIC ${PROJECT_SOURCE_DIR}/src/any_synchronizer.cpp)
    target_link_libraries(${name} PUBLIC gradsync::gradsync ${libs} PRIVATE gradsync_build_flags)
    target_compile_definitions(${name} PUBLIC "GRADSYNC_ANY_LIBRARY=\"${backends}\"")
  endif()
  set(${out} ${name} PARENT_SCOPE)
endfunction()

# gradsync_link_any(TARGET LIB...): links TARGET (PRIVATE) to the gradsync_any_library of the
# backends among the libraries LIB... it links (gradsync::mpi, gradsync::gloo), and names that
# library in TARGET's property GRADSYNC_ANY (tests/ shares a precompiled header among the programs
# that link the one without backends). Not with gradsync::nccl (see above) or gradsync::torch
# (LibTorch may compile for another C++ ABI).
function(gradsync_link_any target)
  if("gradsync::nccl" IN_LIST ARGN OR "gradsync::torch" IN_LIST ARGN)
    return()
  endif()
  set(backends "")
  foreach(backend mpi gloo)
    if("gradsync::${backend}" IN_LIST ARGN)
      list(APPEND backends ${backend})
    endif()
  endforeach()
  gradsync_any_library(lib ${backends})
  target_link_libraries(${target} PRIVATE ${lib})
  set_target_properties(${target} PROPERTIES GRADSYNC_ANY ${lib})
endfunction()
