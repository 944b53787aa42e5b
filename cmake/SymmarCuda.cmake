# CUDA backend: kernels for every architecture in CMAKE_CUDA_ARCHITECTURES, compiled with warnings
# as errors and a hard failure on register spills or any other local memory (a kernel's stack frame
# must be 0 bytes: parameters are __grid_constant__, arrays indexed by constants only). The runtime is linked statically and the driver
# is reached through cudaGetDriverEntryPointByVersion, so nothing links libcuda.
if(SYMMAR_WITH_CUDA)
  # nvcc is looked for on PATH and in $CUDACXX, then where the CUDA toolkit installs by default
  # (a `pip install .` does not inherit scripts/build.sh's PATH).
  find_program(_symmar_nvcc nvcc)
  if(NOT CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX} AND NOT _symmar_nvcc AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    enable_language(CUDA)
    find_package(CUDAToolkit REQUIRED)
    set(CMAKE_CUDA_STANDARD 17)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    set(SYMMAR_CUDA_FLAGS
        --Werror all-warnings
        -Xptxas=--warn-on-spills,--warn-on-local-memory-usage,--warning-as-error
        -Xcompiler=-Wall,-Wextra
        --expt-relaxed-constexpr)
  else()
    message(WARNING "No CUDA compiler found: building the host backend only")
    set(SYMMAR_WITH_CUDA OFF)
  endif()
endif()
if(NOT SYMMAR_WITH_CUDA)
  set(SYMMAR_WITH_NCCL OFF)
endif()
