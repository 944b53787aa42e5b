#!/bin/sh
# Packaging test: installs the build tree into a temporary prefix, then builds and runs an
# out-of-tree consumer twice: through find_package(symmar CONFIG) and through pkg-config (symmar.pc).
#
#   run.sh BINARY_DIR CMAKE_COMMAND GENERATOR [MAKE_PROGRAM] [C_COMPILER] [CXX_COMPILER]
set -eu

BIN=${1:?usage: run.sh BINARY_DIR CMAKE_COMMAND GENERATOR [MAKE_PROGRAM] [C_COMPILER] [CXX_COMPILER]}
CMAKE=${2:?cmake command}
GEN=${3:?generator}
MAKEPROG=${4:-}
CC_BIN=${5:-cc}
CXX_BIN=${6:-c++}
HERE=$(cd "$(dirname "$0")" && pwd)
unset LD_LIBRARY_PATH  # the consumers must find the installed library through their rpath

TMP=$(mktemp -d "${TMPDIR:-/tmp}/symmar-packaging.XXXXXX")
trap 'rm -rf "$TMP"' EXIT INT TERM
PREFIX=$TMP/prefix
fail() { echo "packaging test FAILED: $*" >&2; exit 1; }
step() { echo "==== $*"; }

step "cmake --install $BIN --prefix $PREFIX"
"$CMAKE" --install "$BIN" --prefix "$PREFIX" >"$TMP/install.log" 2>&1 || { cat "$TMP/install.log"; fail "install"; }

for f in include/symmar/symmar.h include/symmar/symmar.hpp; do
  [ -f "$PREFIX/$f" ] || fail "$f not installed"
done
CONFIG=$(find "$PREFIX" -name symmarConfig.cmake | head -n 1)
PC=$(find "$PREFIX" -name symmar.pc | head -n 1)
LIB=$(find "$PREFIX" -name 'libsymmar.so.*' | head -n 1)
[ -n "$CONFIG" ] || fail "symmarConfig.cmake not installed"
[ -n "$PC" ] || fail "symmar.pc not installed"
[ -n "$LIB" ] || fail "libsymmar.so.* not installed"
[ -f "$(dirname "$CONFIG")/symmarConfigVersion.cmake" ] || fail "symmarConfigVersion.cmake not installed"
# The installed package must not point back into the build or source tree.
if grep -rl "$BIN" "$(dirname "$CONFIG")" "$PC"; then fail "installed package files reference the build tree $BIN"; fi

step "consumer via find_package(symmar CONFIG)"
set -- -S "$HERE/consumer" -B "$TMP/cmake-build" -G "$GEN" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$PREFIX" -DCMAKE_C_COMPILER="$CC_BIN" -DCMAKE_CXX_COMPILER="$CXX_BIN"
[ -n "$MAKEPROG" ] && set -- "$@" -DCMAKE_MAKE_PROGRAM="$MAKEPROG"
"$CMAKE" "$@" || fail "configure of the find_package consumer"
"$CMAKE" --build "$TMP/cmake-build" --parallel 1 || fail "build of the find_package consumer"
for exe in consumer consumer_cpp; do
  ldd "$TMP/cmake-build/$exe" | grep -q "libsymmar.so.* => $PREFIX/" ||
    { ldd "$TMP/cmake-build/$exe"; fail "$exe does not load the installed libsymmar"; }
  "$TMP/cmake-build/$exe" || fail "$exe"
done
if grep -q '^SYMMAR_WITH_MPI:.*=ON' "$BIN/CMakeCache.txt" 2>/dev/null || [ -n "$(find "$PREFIX" -name 'libsymmar_mpi.so*' | head -n 1)" ]; then
  [ -x "$TMP/cmake-build/consumer_mpi" ] || fail "symmar has MPI but consumer_mpi was not built"
  "$TMP/cmake-build/consumer_mpi" || fail "consumer_mpi"
fi

step "consumer via pkg-config ($PC)"
if command -v pkg-config >/dev/null 2>&1; then
  PKG_CONFIG_PATH=$(dirname "$PC")
  export PKG_CONFIG_PATH
  echo "symmar $(pkg-config --modversion symmar): $(pkg-config --cflags --libs symmar)"
  pkg-config --exists symmar || fail "pkg-config cannot find symmar"
  LIBDIR=$(pkg-config --variable=libdir symmar)
  [ -f "$LIBDIR/$(basename "$LIB")" ] || fail "symmar.pc libdir $LIBDIR does not hold the installed library"
  # shellcheck disable=SC2046
  "$CC_BIN" -std=c11 -Wall -Werror -o "$TMP/consumer-pc" "$HERE/consumer/consumer.c" \
    $(pkg-config --cflags symmar) $(pkg-config --libs symmar) -Wl,-rpath,"$LIBDIR" || fail "pkg-config build"
  ldd "$TMP/consumer-pc" | grep -q "libsymmar.so.* => $PREFIX/" || { ldd "$TMP/consumer-pc"; fail "consumer-pc does not load the installed libsymmar"; }
  "$TMP/consumer-pc" || fail "consumer-pc"
else
  echo "pkg-config not found: skipping the pkg-config consumer"
fi

echo "packaging test passed"
