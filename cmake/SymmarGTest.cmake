# Provides GTest::gtest and GTest::gtest_main for the test suites: the installed package when
# find_package finds it, else GoogleTest built from sources (machines without network or a
# packaged GoogleTest, e.g. the GPU check box: scripts/gpu-check.sh carries the sources).
#   SYMMAR_GTEST_SRC            GoogleTest source tree to use when no package is found
#   SYMMAR_GTEST_FROM_SOURCE    skip find_package and always build from sources
# Source search order: SYMMAR_GTEST_SRC, third_party/googletest, /usr/src/googletest.
include_guard(GLOBAL)

set(SYMMAR_GTEST_SRC "" CACHE PATH "GoogleTest source tree used when find_package(GTest) fails")
option(SYMMAR_GTEST_FROM_SOURCE "Always build GoogleTest from SYMMAR_GTEST_SRC (or the default source paths)" OFF)

if(NOT TARGET GTest::gtest_main AND NOT SYMMAR_GTEST_FROM_SOURCE)
  find_package(GTest QUIET)
endif()

if(NOT TARGET GTest::gtest_main)
  set(_symmar_gtest_dir "")
  foreach(_dir "${SYMMAR_GTEST_SRC}" "${CMAKE_CURRENT_LIST_DIR}/../third_party/googletest" "/usr/src/googletest")
    if(_dir AND EXISTS "${_dir}/CMakeLists.txt" AND NOT _symmar_gtest_dir)
      set(_symmar_gtest_dir "${_dir}")
    endif()
  endforeach()
  if(NOT _symmar_gtest_dir)
    message(FATAL_ERROR "GoogleTest not found: install it, or set SYMMAR_GTEST_SRC to a googletest source tree")
  endif()
  message(STATUS "Building GoogleTest from ${_symmar_gtest_dir}")
  set(BUILD_GMOCK OFF CACHE BOOL "" FORCE)
  set(INSTALL_GTEST OFF CACHE BOOL "" FORCE)
  add_subdirectory("${_symmar_gtest_dir}" "${CMAKE_BINARY_DIR}/_deps/googletest" EXCLUDE_FROM_ALL)
  if(NOT TARGET GTest::gtest_main)
    add_library(GTest::gtest ALIAS gtest)
    add_library(GTest::gtest_main ALIAS gtest_main)
  endif()
endif()
