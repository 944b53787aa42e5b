// Fuzzes rank 0's judgement of a joining rank's first message, wire::judgeHello (src/bootstrap/wire.cc): anyone who
// can reach rank 0's listener can send these bytes. Input layout: the first sizeof(Hello) bytes are the Hello as it
// arrives; from the end (FuzzedDataProvider) come rank 0's state: whether its nonce equals the hello's (so matching
// nonces are common), else the nonce, nranks in 1..64, and the taken vector, whose size (0..80) is independent of
// nranks, as a caller's bug could make it; judgeHello must not read past it. Checks:
//  - kAccept only when magic, version and nonce match, h.nranks == nranks, rank is in 1..nranks-1 and inside taken
//    and not yet taken;
//  - kStray exactly when magic, version or nonce differ (rank 0 must not answer those);
//  - kWrongSize, kBadRank and kDuplicate only when their condition holds.
// A broken check aborts, which libFuzzer reports as a crash and saves the input.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "bootstrap/wire.h"
#include "fuzz/fuzz_check.h"

namespace sw = symmar::wire;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  sw::Hello h;
  memset(&h, 0, sizeof(h));
  const std::vector<uint8_t> head = in.ConsumeBytes<uint8_t>(sizeof(h));
  if (!head.empty()) memcpy(&h, head.data(), head.size());  // memcpy from nullptr is UB even for 0 bytes
  const bool same_nonce = in.ConsumeBool();
  const uint64_t nonce = same_nonce ? h.nonce : in.ConsumeIntegral<uint64_t>();
  const int nranks = in.ConsumeIntegralInRange<int>(1, 64);
  std::vector<bool> taken(in.ConsumeIntegralInRange<size_t>(0, 80));
  for (size_t i = 0; i < taken.size(); ++i) taken[i] = in.ConsumeBool();

  const sw::HelloVerdict v = sw::judgeHello(h, nonce, nranks, taken);

  const bool ours = h.magic == sw::kIdMagic && h.version == sw::kIdVersion && h.nonce == nonce;
  const bool size_ok = h.nranks == nranks;
  const bool rank_ok = h.rank >= 1 && h.rank < nranks;
  // Ranks past the end of taken count as taken (wire.h).
  const bool free_slot = rank_ok && static_cast<size_t>(h.rank) < taken.size() && !taken[static_cast<size_t>(h.rank)];
  FUZZ_CHECK((v == sw::HelloVerdict::kStray) == !ours);
  switch (v) {
    case sw::HelloVerdict::kStray: break;
    case sw::HelloVerdict::kAccept: FUZZ_CHECK(ours && size_ok && rank_ok && free_slot); break;
    case sw::HelloVerdict::kWrongSize: FUZZ_CHECK(!size_ok); break;
    case sw::HelloVerdict::kBadRank: FUZZ_CHECK(!rank_ok); break;
    case sw::HelloVerdict::kDuplicate: FUZZ_CHECK(rank_ok && !free_slot); break;
    default: FUZZ_CHECK(!"verdict outside HelloVerdict");
  }
  // A hello that proves the nonce, names this world size and a free rank must be let in.
  if (ours && size_ok && free_slot) FUZZ_CHECK(v == sw::HelloVerdict::kAccept);
  return 0;
}
