#include "api/comm.h"

#include <cstdint>

#include "core/names.h"

uint32_t symmarComm::fallbacks() const {
  uint32_t bits = backend ? backend->fallbacks() : 0;
  if (fallback_fn) bits |= symmar::algoBit(symmarAlgoMpi);
  return bits;
}
