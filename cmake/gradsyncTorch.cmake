# gradsync::torch: gradsync plus LibTorch (the adapter in gradsync/torch/: a Synchronizer attached
# to a torch::nn::Module), when find_package(Torch) finds it (Debian: libtorch-dev) and
# GRADSYNC_ENABLE_TORCH is not off. Read by the build (CMakeLists.txt) and by the installed package
# config.
include_guard(GLOBAL)
if(DEFINED GRADSYNC_ENABLE_TORCH AND NOT GRADSYNC_ENABLE_TORCH)
  return()
endif()
include(${CMAKE_CURRENT_LIST_DIR}/gradsyncOptionalTarget.cmake)
# A CUDA build of PyTorch (the registry's wheels) detects the GPU architectures in its config by
# compiling a CUDA program, which fails under this project's CUDA dialect and where there is no
# GPU: name them (the project's own, else Hopper's). In this project's build only: a consumer of
# the installed package keeps its own choice.
if(NOT CMAKE_FIND_PACKAGE_NAME STREQUAL "gradsync" AND NOT DEFINED TORCH_CUDA_ARCH_LIST
   AND NOT DEFINED ENV{TORCH_CUDA_ARCH_LIST})
  set(TORCH_CUDA_ARCH_LIST 9.0)
  if(CMAKE_CUDA_ARCHITECTURES)
    list(TRANSFORM CMAKE_CUDA_ARCHITECTURES REPLACE "^([0-9]+)([0-9])$" "\\1.\\2" OUTPUT_VARIABLE TORCH_CUDA_ARCH_LIST)
  endif()
endif()
gradsync_optional_package(torch GRADSYNC_WITH_TORCH torch
                          "LibTorch not found (Debian: libtorch-dev); gradsync::torch and the Python package are not available"
                          Torch)
# A PyTorch wheel's CUDA libraries find their NVIDIA dependencies (NCCL, cuDNN, ...) in the wheel's
# nvidia/*/lib through their RUNPATH at run time; the linker does not read that RUNPATH, and would
# take an older system copy (the CUDA toolkit's NCCL) and miss symbols. Point it at the wheel's.
if(TARGET gradsync::torch AND DEFINED TORCH_INSTALL_PREFIX)
  file(GLOB wheel_nvidia_libs LIST_DIRECTORIES true ${TORCH_INSTALL_PREFIX}/../nvidia/*/lib)
  foreach(dir IN LISTS wheel_nvidia_libs)
    target_link_options(gradsync::torch INTERFACE "LINKER:-rpath-link,${dir}")
  endforeach()
endif()
