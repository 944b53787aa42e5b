# Runs tools/check_layers.py on a copy of the tree with one planted upward include (core -> api):
# the checker must report it, so a checker that passes everything fails CI.
# Inputs: SRC (project root), WORK (scratch folder), PYTHON.
file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}")
foreach(dir include src cuda)
  file(COPY "${SRC}/${dir}" DESTINATION "${WORK}")
endforeach()
file(APPEND "${WORK}/src/core/error.h" "\n#include \"api/comm.h\"\n")
execute_process(COMMAND "${PYTHON}" "${SRC}/tools/check_layers.py" "${WORK}" RESULT_VARIABLE rc)
if(rc EQUAL 0)
  message(FATAL_ERROR "check_layers.py missed the upward include planted in src/core/error.h")
endif()
message(STATUS "the planted upward include was reported, as it must be")
