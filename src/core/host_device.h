// SYMMAR_HD marks a function that the CUDA kernels (nvcc) and the host code (the host compiler)
// share: inlined into both, so one definition serves the device and the CPU.
#pragma once

#if defined(__CUDACC__)
#define SYMMAR_HD __host__ __device__ __forceinline__
#else
#define SYMMAR_HD inline
#endif
