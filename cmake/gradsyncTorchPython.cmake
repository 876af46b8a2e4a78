# gradsync_torch_of_interpreter(PYTHON): the target gradsync_torch_python (INTERFACE) over the torch
# that PYTHON imports - its headers, libc10/libtorch_cpu/libtorch_python and its C++ ABI - and the
# variables GRADSYNC_PYTHON_TORCH_VERSION, GRADSYNC_PYTHON_TORCH_PYBIND11 (whether torch ships
# pybind11's headers) and GRADSYNC_PYTHON_TORCH_OWN_GLOO (whether torch carries a Gloo of its own
# inside libtorch_cpu, as the registry's wheels do: its exported symbols would take the place of
# the system libgloo's that collective 'gloo' is built against, a different version). The Python extension builds against this, never against a LibTorch found
# elsewhere: an extension built for one torch and loaded under another fails with undefined
# symbols, and a CUDA wheel's own CMake config needs a CUDA toolkit even for a CPU extension.
#
# The interpreter runs with -I: under pip's build isolation PYTHONPATH points into the isolated
# build environment, which holds no torch; -I ignores it and sees the environment being installed
# into (torch must never be build-isolated: the extension must match the installed one).
include_guard(GLOBAL)
function(gradsync_torch_of_interpreter python)
  set(query [=[
import os, torch, torch.utils.cpp_extension as ce
print(torch.__version__)
print(int(torch._C._GLIBCXX_USE_CXX11_ABI))
print("|".join(ce.include_paths()))
print(os.path.join(os.path.dirname(torch.__file__), "lib"))
print(int(torch.distributed.is_available() and torch.distributed.is_gloo_available()))
]=])
  execute_process(COMMAND ${python} -I -c "${query}" RESULT_VARIABLE failed OUTPUT_VARIABLE out
                  ERROR_VARIABLE err OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(failed)
    message(FATAL_ERROR "gradsync: ${python} cannot import torch:\n${err}\nInstall PyTorch into that "
                        "environment first (pip install torch), or point GRADSYNC_PYTHON at an interpreter that has it.")
  endif()
  string(REPLACE "\n" ";" lines "${out}")
  # cpp_extension may print warnings on stdout before our lines (no CUDA runtime, ...): take the last five.
  list(LENGTH lines n)
  math(EXPR first "${n} - 5")
  list(SUBLIST lines ${first} 5 lines)
  list(GET lines 0 version)
  list(GET lines 1 abi)
  list(GET lines 2 includes)
  list(GET lines 3 libdir)
  list(GET lines 4 has_gloo)
  string(REPLACE "|" ";" includes "${includes}")

  set(libs)
  foreach(name c10 torch_cpu torch torch_python)
    find_library(lib_${name} ${name} PATHS ${libdir} NO_DEFAULT_PATH NO_CACHE)
    if(NOT lib_${name})
      message(FATAL_ERROR "gradsync: lib${name}.so is not in ${libdir} (the torch that ${python} imports)")
    endif()
    list(APPEND libs ${lib_${name}})
  endforeach()

  add_library(gradsync_torch_python INTERFACE)
  target_include_directories(gradsync_torch_python SYSTEM INTERFACE ${includes})
  target_compile_definitions(gradsync_torch_python INTERFACE _GLIBCXX_USE_CXX11_ABI=${abi})
  target_link_libraries(gradsync_torch_python INTERFACE ${libs})
  set(pybind11_in_torch OFF)
  foreach(dir IN LISTS includes)
    if(EXISTS ${dir}/pybind11/pybind11.h)
      set(pybind11_in_torch ON)
    endif()
  endforeach()
  set(own_gloo OFF)
  if(has_gloo)
    execute_process(COMMAND objdump -p ${lib_torch_cpu} OUTPUT_VARIABLE dynamic ERROR_QUIET)
    if(NOT dynamic MATCHES "NEEDED +libgloo")
      set(own_gloo ON)
    endif()
  endif()
  set(GRADSYNC_PYTHON_TORCH_OWN_GLOO ${own_gloo} PARENT_SCOPE)
  set(GRADSYNC_PYTHON_TORCH_VERSION ${version} PARENT_SCOPE)
  set(GRADSYNC_PYTHON_TORCH_PYBIND11 ${pybind11_in_torch} PARENT_SCOPE)
endfunction()
