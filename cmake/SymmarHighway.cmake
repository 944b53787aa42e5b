# Google Highway (SIMD with run-time dispatch), required by the host reductions (src/host/simd_reduce.cc).
# Debian's libhwy-dev ships a CMake package (hwy::hwy) and libhwy.pc; both name the shared libhwy.so,
# the package has no static archive.
find_package(hwy CONFIG QUIET)
if(NOT TARGET hwy::hwy)
  find_package(PkgConfig QUIET)
  if(PkgConfig_FOUND)
    pkg_check_modules(SYMMAR_HWY QUIET IMPORTED_TARGET libhwy)
    if(SYMMAR_HWY_FOUND)
      add_library(hwy::hwy INTERFACE IMPORTED)
      target_link_libraries(hwy::hwy INTERFACE PkgConfig::SYMMAR_HWY)
    endif()
  endif()
endif()
if(NOT TARGET hwy::hwy)
  message(FATAL_ERROR "Google Highway not found (required for the host reductions): apt-get install libhwy-dev "
                      "(scripts/install-deps.sh), or point CMAKE_PREFIX_PATH at a Highway install")
endif()
