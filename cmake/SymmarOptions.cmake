# Build options and global compiler settings.
get_directory_property(_symmar_has_parent PARENT_DIRECTORY)
if(_symmar_has_parent)
  set(_symmar_top OFF)
else()
  set(_symmar_top ON)
endif()

option(SYMMAR_BUILD_TESTS "Build the GoogleTest suites" ${_symmar_top})
option(SYMMAR_BUILD_BENCHMARKS "Build symmar_perf and the micro-benchmarks" ${_symmar_top})
option(SYMMAR_BUILD_EXAMPLES "Build the examples" ${_symmar_top})
option(SYMMAR_WITH_MPI "Build libsymmar_mpi (MPI bootstrap and the mpi fallback)" ON)
option(SYMMAR_WITH_NCCL "Build the NCCL fallback (libnccl is loaded at run time)" ON)
option(SYMMAR_WITH_CUDA "Build the CUDA backend and kernels" ON)
option(SYMMAR_WERROR "Treat warnings as errors" ON)
option(SYMMAR_BUILD_FUZZERS "Build the libFuzzer harnesses in tests/fuzz (clang only; needs SYMMAR_BUILD_TESTS)" OFF)

set(CMAKE_CXX_STANDARD 17)
set(CMAKE_CXX_STANDARD_REQUIRED ON)
set(CMAKE_C_STANDARD 11)
set(CMAKE_POSITION_INDEPENDENT_CODE ON)
if(NOT CMAKE_BUILD_TYPE AND NOT CMAKE_CONFIGURATION_TYPES)
  set(CMAKE_BUILD_TYPE Release CACHE STRING "Build type" FORCE)
endif()

set(SYMMAR_WARNINGS -Wall -Wextra)
if(SYMMAR_WERROR)
  list(APPEND SYMMAR_WARNINGS -Werror)
endif()

find_package(Threads REQUIRED)
# nlohmann/json: the Debian package, else a header tree in SYMMAR_JSON_INCLUDE or third_party/
# (machines without the package, e.g. an offline GPU box: scripts/prepare-offline-deps.sh).
find_package(nlohmann_json 3 QUIET)
if(NOT nlohmann_json_FOUND)
  set(SYMMAR_JSON_INCLUDE "${PROJECT_SOURCE_DIR}/third_party/nlohmann_json/include" CACHE PATH
      "Directory holding nlohmann/json.hpp when the package is not installed")
  if(NOT EXISTS "${SYMMAR_JSON_INCLUDE}/nlohmann/json.hpp")
    message(FATAL_ERROR "nlohmann/json not found: apt-get install nlohmann-json3-dev, or set SYMMAR_JSON_INCLUDE")
  endif()
  add_library(nlohmann_json::nlohmann_json INTERFACE IMPORTED)
  set_target_properties(nlohmann_json::nlohmann_json PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${SYMMAR_JSON_INCLUDE}")
endif()
if(SYMMAR_WITH_MPI)
  find_package(MPI COMPONENTS C)
  if(NOT MPI_C_FOUND)
    message(WARNING "MPI not found: building without libsymmar_mpi")
    set(SYMMAR_WITH_MPI OFF)
  endif()
endif()

include(${CMAKE_CURRENT_LIST_DIR}/SymmarHighway.cmake)

# The venv scripts/install-deps.sh makes (torch, mpi4py, scikit-build-core; $SYMMAR_VENV or
# /var/cache/symmar-venv): libsymmar_torch is built against its torch and the binding's tests run
# with it where $SYMMAR_PYTHON names no other, so a plain configure + ctest after the install step
# builds and tests what the install step provided. Each use checks that it works.
if(DEFINED ENV{SYMMAR_VENV})
  set(_symmar_venv_python "$ENV{SYMMAR_VENV}/bin/python")
else()
  set(_symmar_venv_python "/var/cache/symmar-venv/bin/python")
endif()
set(SYMMAR_VENV_PYTHON "${_symmar_venv_python}" CACHE FILEPATH
    "Python tried after $SYMMAR_PYTHON for libsymmar_torch and the binding's tests")
