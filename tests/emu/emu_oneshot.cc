// cuda/oneshot.cu, compiled unchanged as host C++ on the emulated CUDA runtime.
#include "cuda/oneshot.cu"
#include "emu/emu_runtime.h"
