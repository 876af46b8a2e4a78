# cmake -DSOURCE=<gradsync> -DWORK=<scratch> -DMODE=install|subdirectory -P consume.cmake
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed: ${ARGN}\n${out}\n${err}")
  endif()
  message(STATUS "${out}")
endfunction()

file(REMOVE_RECURSE ${WORK})
set(consumer ${SOURCE}/tests/package/consumer)
if(MODE STREQUAL install)
  run(${CMAKE_COMMAND} -S ${SOURCE} -B ${WORK}/gradsync -DCMAKE_INSTALL_PREFIX=${WORK}/prefix
      -DGRADSYNC_BUILD_TESTS=OFF -DGRADSYNC_BUILD_EXAMPLES=OFF -DGRADSYNC_BUILD_BENCHMARKS=OFF
      -DGRADSYNC_BUILD_TRAINER=OFF -DGRADSYNC_BUILD_PYTHON=OFF -DGRADSYNC_BUILD_SIM=OFF)
  run(${CMAKE_COMMAND} --install ${WORK}/gradsync)
  run(${CMAKE_COMMAND} -S ${consumer} -B ${WORK}/consumer -DCMAKE_PREFIX_PATH=${WORK}/prefix)
else()
  run(${CMAKE_COMMAND} -S ${consumer} -B ${WORK}/consumer -DGRADSYNC_SOURCE_DIR=${SOURCE})
endif()
run(${CMAKE_COMMAND} --build ${WORK}/consumer)
run(${WORK}/consumer/consumer)
run(${WORK}/consumer/consumer_sim)
