# gradsync::torch: gradsync plus LibTorch (the adapter in gradsync/torch/: a Synchronizer attached
# to a torch::nn::Module), when find_package(Torch) finds it (Debian: libtorch-dev) and
# GRADSYNC_ENABLE_TORCH is not off. Read by the build (CMakeLists.txt) and by the installed package
# config.
include_guard(GLOBAL)
if(DEFINED GRADSYNC_ENABLE_TORCH AND NOT GRADSYNC_ENABLE_TORCH)
  return()
endif()
include(${CMAKE_CURRENT_LIST_DIR}/gradsyncOptionalTarget.cmake)
gradsync_optional_package(torch GRADSYNC_WITH_TORCH torch
                          "LibTorch not found (Debian: libtorch-dev); gradsync::torch and the Python package are not available"
                          Torch)
