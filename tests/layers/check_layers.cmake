# cmake -DROOTS=<dir>[;<dir>...] [-DPROGRAMS=<dir>[;<dir>...]] -P check_layers.cmake
#
# No include runs up a layer. Each ROOT holds headers under gradsync/<folder>/ (files right under
# gradsync/ are the synchronizer's); a folder's layer comes from the order below, lowest first.
# A header may include headers of its own folder and of lower layers, never of a higher layer or
# of another folder of its own layer. detail/ may include core/error.hpp alone of core/.
# Programs (PROGRAMS: the trainer, tools, examples, ...) name nothing of gradsync's detail: no
# detail/ header of any folder, no ::detail:: namespace of the library.
set(order
  core
  detail
  transport
  "codec|slicing|priority"
  "collective|cuda"
  schedule
  synchronizer
  "sim|torch")

set(layer_index 0)
foreach(layer IN LISTS order)
  string(REPLACE "|" ";" folders "${layer}")
  foreach(folder IN LISTS folders)
    set(layer_of_${folder} ${layer_index})
  endforeach()
  math(EXPR layer_index "${layer_index} + 1")
endforeach()

set(problems "")
# The folder under gradsync/ of `path` (relative to a root, "gradsync/..."), or "synchronizer".
function(folder_of path out)
  if(path MATCHES "^gradsync/([^/]+)/")
    set(${out} ${CMAKE_MATCH_1} PARENT_SCOPE)
  else()
    set(${out} synchronizer PARENT_SCOPE)
  endif()
endfunction()

foreach(root IN LISTS ROOTS)
  get_filename_component(root "${root}" ABSOLUTE)
  file(GLOB_RECURSE headers RELATIVE "${root}" "${root}/gradsync/*.hpp" "${root}/gradsync/*.cuh" "${root}/gradsync/*.h")
  foreach(header IN LISTS headers)
    folder_of("${header}" from)
    if(NOT DEFINED layer_of_${from})
      string(APPEND problems "${header}: folder '${from}' is in no layer: add it to the order in ${CMAKE_CURRENT_LIST_FILE}\n")
      continue()
    endif()
    file(STRINGS "${root}/${header}" lines REGEX "^[ \t]*#[ \t]*include[ \t]*[<\"]")
    get_filename_component(dir "${root}/${header}" DIRECTORY)
    foreach(line IN LISTS lines)
      if(line MATCHES "#[ \t]*include[ \t]*\"([^\"]+)\"")
        get_filename_component(target "${dir}/${CMAKE_MATCH_1}" ABSOLUTE)
        file(RELATIVE_PATH target "${root}" "${target}")
      elseif(line MATCHES "#[ \t]*include[ \t]*<(gradsync/[^>]+)>")
        set(target "${CMAKE_MATCH_1}")
      else()
        continue()  # not gradsync's
      endif()
      if(NOT target MATCHES "^gradsync/")
        continue()  # a program's own header next to it, outside the library
      endif()
      folder_of("${target}" to)
      string(REGEX REPLACE "^gradsync/" "" shown "${target}")
      if(NOT DEFINED layer_of_${to})
        string(APPEND problems "${header} includes ${shown}: folder '${to}' is in no layer\n")
      elseif(from STREQUAL "detail" AND to STREQUAL "core" AND NOT shown STREQUAL "core/error.hpp")
        string(APPEND problems "${header} includes ${shown}: detail/ may include core/error.hpp alone of core/\n")
      elseif(NOT from STREQUAL to AND NOT layer_of_${to} LESS layer_of_${from})
        string(APPEND problems "${header} includes ${shown}: ${from} (layer ${layer_of_${from}}) may include only "
                               "its own folder and lower layers, not ${to} (layer ${layer_of_${to}})\n")
      endif()
    endforeach()
  endforeach()
endforeach()

# A detail/ header of any folder, or a detail namespace of gradsync's or of a library folder's
# (codec::detail::, also written inside namespace gradsync): the programs' own detail stays theirs.
string(REPLACE "|" ";" folders "${order}")
list(REMOVE_ITEM folders torch)  # torch::detail:: is LibTorch's too
list(JOIN folders "|" folders)
set(detail_use "gradsync/([a-z_]+/)*detail/|(^|[^a-z_])(gradsync|${folders})::detail::")
foreach(dir IN LISTS PROGRAMS)
  get_filename_component(dir "${dir}" ABSOLUTE)
  file(GLOB_RECURSE sources "${dir}/*.hpp" "${dir}/*.cpp" "${dir}/*.cu" "${dir}/*.cuh" "${dir}/*.h")
  foreach(source IN LISTS sources)
    file(STRINGS "${source}" lines REGEX "${detail_use}")
    if(lines)
      string(APPEND problems "${source} uses gradsync's detail/ (a detail/ header or a library namespace's "
                             "::detail::): programs use the library's public headers and names\n")
    endif()
  endforeach()
endforeach()

list(JOIN order " < " shown)
if(problems)
  message("${problems}")  # unwrapped, one line each
  message(FATAL_ERROR "gradsync: the layers (${shown}) do not hold; see above")
endif()
message(STATUS "gradsync: the layers hold: ${shown}")
