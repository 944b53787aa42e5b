# libsymmar_torch: the compiled kernels of torch.ops.symmar.all_reduce_ / all_reduce
# (python/csrc/torch_ops.cc). Built against the torch of the first Python that has it:
# SYMMAR_TORCH_PYTHON, $SYMMAR_PYTHON, SYMMAR_VENV_PYTHON (the install step's venv), the Python that
# runs the wheel build, python3. Without one (or with SYMMAR_WITH_TORCH=OFF) the ops keep their
# Python kernels. The library is tied to the torch it was built against (named in
# libsymmar_torch.torch-version beside it); symmar.ops falls back to the Python kernels under any
# other torch, or when it cannot load it.
set(SYMMAR_WITH_TORCH AUTO CACHE STRING "Build libsymmar_torch: AUTO (when a Python with torch is found), ON or OFF")
set(SYMMAR_TORCH_PYTHON "" CACHE FILEPATH "Python whose torch libsymmar_torch is built against")
if(SYMMAR_WITH_TORCH STREQUAL "OFF")
  return()
endif()

set(_symmar_torch_dir "")
foreach(_py IN ITEMS "${SYMMAR_TORCH_PYTHON}" "$ENV{SYMMAR_PYTHON}" "${SYMMAR_VENV_PYTHON}" "${Python3_EXECUTABLE}"
                    "${Python_EXECUTABLE}" python3)
  if(NOT _py)
    continue()
  endif()
  execute_process(
    COMMAND "${_py}" -c "import os, torch; print(os.path.dirname(torch.__file__)); print(int(torch._C._GLIBCXX_USE_CXX11_ABI)); print(torch.__version__); print(int('parallel backend: OpenMP' in torch.__config__.parallel_info()))"
    RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(_rc EQUAL 0)
    string(REPLACE "\n" ";" _out "${_out}")
    list(GET _out 0 _symmar_torch_dir)
    list(GET _out 1 _symmar_torch_abi)
    list(GET _out 2 _symmar_torch_version)
    list(GET _out 3 _symmar_torch_openmp)
    set(SYMMAR_TORCH_PYTHON "${_py}" CACHE FILEPATH "Python whose torch libsymmar_torch is built against" FORCE)
    break()
  endif()
endforeach()
if(NOT _symmar_torch_dir)
  if(SYMMAR_WITH_TORCH STREQUAL "ON")
    message(FATAL_ERROR "SYMMAR_WITH_TORCH=ON but no Python with torch was found (set SYMMAR_TORCH_PYTHON)")
  endif()
  message(STATUS "libsymmar_torch: no Python with torch found; torch.ops.symmar keeps its Python kernels")
  return()
endif()
message(STATUS "libsymmar_torch: against torch ${_symmar_torch_version} (${_symmar_torch_dir})")

add_library(symmar_torch SHARED ${PROJECT_SOURCE_DIR}/python/csrc/torch_ops.cc
                                ${PROJECT_SOURCE_DIR}/python/csrc/torch_threads.cc)
target_include_directories(symmar_torch SYSTEM PRIVATE
  "${_symmar_torch_dir}/include" "${_symmar_torch_dir}/include/torch/csrc/api/include")
target_compile_definitions(symmar_torch PRIVATE _GLIBCXX_USE_CXX11_ABI=${_symmar_torch_abi})
target_compile_options(symmar_torch PRIVATE ${SYMMAR_WARNINGS})
# torch's libraries are loaded by `import torch` before this one; they are found by soname then.
target_link_libraries(symmar_torch PRIVATE symmar "${_symmar_torch_dir}/lib/libc10.so"
                                           "${_symmar_torch_dir}/lib/libtorch_cpu.so")
# torch_threads.cc's at::parallel_for has a parallel region only when compiled with OpenMP (where
# torch's backend is OpenMP). Its calls go to torch's own runtime: the libgomp that torch ships,
# linked by its soname, which is then the one torch already loaded; without such a file, to
# whichever runtime libtorch_cpu brings (the symbols stay for the loader to resolve through it).
if(_symmar_torch_openmp)
  set_source_files_properties(${PROJECT_SOURCE_DIR}/python/csrc/torch_threads.cc PROPERTIES COMPILE_OPTIONS -fopenmp)
  file(GLOB _symmar_torch_gomp "${_symmar_torch_dir}/lib/libgomp*.so*")
  if(_symmar_torch_gomp)
    list(GET _symmar_torch_gomp 0 _symmar_torch_gomp)
    target_link_libraries(symmar_torch PRIVATE "${_symmar_torch_gomp}")
  endif()
endif()
# Beside libsymmar, where symmar.ops looks for it (in the build tree and in the wheel).
# torch 2.x headers need C++20.
set_target_properties(symmar_torch PROPERTIES LIBRARY_OUTPUT_DIRECTORY "${CMAKE_BINARY_DIR}/src" CXX_STANDARD 20)
# The torch it was built against, beside it: torch's C++ ABI changes between releases, and a library
# built for another torch may load and then corrupt memory, so symmar.ops loads it only under the
# torch this file names.
set(SYMMAR_TORCH_VERSION_FILE "${CMAKE_BINARY_DIR}/src/libsymmar_torch.torch-version")
file(WRITE "${SYMMAR_TORCH_VERSION_FILE}" "${_symmar_torch_version}\n")
