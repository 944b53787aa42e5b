// cuda/lamport.cu, compiled unchanged as host C++ on the emulated CUDA runtime.
// clang-format off
#include "emu/emu_runtime.h"
#include "cuda/lamport.cu"
// clang-format on
