#include "api/comm.h"

#include <cstdint>

#include "core/names.h"

uint32_t symmarComm::fallbacks(symmar::Collective coll) const {
  uint32_t bits = backend ? backend->fallbacks() : 0;  // NCCL serves every collective
  const bool host = coll == symmar::Collective::kAllReduce        ? fallback_fn != nullptr
                    : coll == symmar::Collective::kReduceScatter ? fallback_reduce_scatter != nullptr
                                                                 : fallback_all_gather != nullptr;
  if (host) bits |= symmar::algoBit(symmarAlgoMpi);
  return bits;
}
