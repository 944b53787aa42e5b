// cuda/twoshot.cu, compiled unchanged as host C++ on the emulated CUDA runtime.
#include "cuda/twoshot.cu"
#include "emu/emu_runtime.h"
