// cuda/lamport_add_rms_norm.cu, compiled unchanged as host C++ on the emulated CUDA runtime.
// clang-format off
#include "emu/emu_runtime.h"
#include "cuda/lamport_add_rms_norm.cu"
// clang-format on
