// cuda/scatter_gather_multimem.cu, compiled unchanged as host C++ on the emulated CUDA runtime.
// The runtime must come first: it defines what the kernel source expects from nvcc.
// clang-format off
#include "emu/emu_runtime.h"
#include "cuda/scatter_gather_multimem.cu"
// clang-format on
