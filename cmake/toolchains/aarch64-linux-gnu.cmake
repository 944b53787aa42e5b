# Cross-compiling for 64-bit Arm Linux with Debian's cross toolchain (g++-aarch64-linux-gnu) and
# its arm64 libraries (dpkg --add-architecture arm64; libhwy-dev:arm64, libgtest-dev:arm64).
# scripts/arm64-check.sh builds with it and runs the host tests under qemu-aarch64.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
# Programs come from the build machine; libraries, headers and CMake packages from the arm64
# multiarch paths (and the architecture-independent ones under /usr).
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu /usr)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)
# Test binaries run through the emulator (ctest and gtest_discover_tests use it), with the loader
# and libc of libc6:arm64 (the cross toolchain's own libc mixed with the multiarch libraries
# hangs in pthread_create).
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64)
