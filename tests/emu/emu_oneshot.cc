// cuda/oneshot.cu, compiled unchanged as host C++ on the emulated CUDA runtime.
#include "emu/emu_runtime.h"
#include "cuda/oneshot.cu"
