// cuda/multimem.cu, compiled unchanged as host C++ on the emulated CUDA runtime.
#include "cuda/multimem.cu"
#include "emu/emu_runtime.h"
