// Fuzzes a joining rank's judgement of rank 0's answer, wire::judgeAck (src/bootstrap/wire.cc): the bytes come from
// whatever answered on rank 0's address. Input layout: the first sizeof(Ack) bytes are the Ack as it arrives; from
// the end (FuzzedDataProvider) come whether this rank's nranks equals the ack's (so matching sizes are common), else
// this rank's nranks. Checks:
//  - symmarSuccess only when magic is right, result == symmarSuccess, reason == kAckOk and nranks matches;
//  - any other return is a code this library defines, in (symmarSuccess, symmarNumResults), so a peer cannot make a
//    rank return an undefined symmarResult_t; why is then non-empty;
//  - ackReasonText gives a non-empty text for any raw reason.
// A broken check aborts, which libFuzzer reports as a crash and saves the input.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bootstrap/wire.h"
#include "fuzz/fuzz_check.h"

namespace sw = symmar::wire;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  sw::Ack a;
  memset(&a, 0, sizeof(a));
  const std::vector<uint8_t> head = in.ConsumeBytes<uint8_t>(sizeof(a));
  if (!head.empty()) memcpy(&a, head.data(), head.size());  // memcpy from nullptr is UB even for 0 bytes
  const bool same_size = in.ConsumeBool();
  const int nranks = same_size ? a.nranks : in.ConsumeIntegral<int32_t>();

  std::string why;
  const symmarResult_t res = sw::judgeAck(a, nranks, &why);
  if (res == symmarSuccess) {
    FUZZ_CHECK(a.magic == sw::kIdMagic && a.result == symmarSuccess && a.reason == sw::kAckOk && a.nranks == nranks);
  } else {
    FUZZ_CHECK(static_cast<int>(res) > symmarSuccess && static_cast<int>(res) < symmarNumResults);
    FUZZ_CHECK(!why.empty());
  }
  const char* text = sw::ackReasonText(a.reason);
  FUZZ_CHECK(text != nullptr && *text != '\0');
  return 0;
}
