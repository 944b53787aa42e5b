// Fuzzes the unique-id decoder, wire::decodeId (src/bootstrap/wire.cc): a symmarUniqueId is 128 bytes a caller
// passes around (often through files or other processes) before symmarCommInitRank trusts it. The input's first
// SYMMAR_UNIQUE_ID_BYTES bytes fill a zeroed id. Checks:
//  - decodeId succeeds exactly when why is nullptr, the port then not 0; it refuses with symmarInvalidArgument;
//  - a decoded id round-trips: encodeId of the payload gives the same 128 bytes (one encoding per id), and decoding
//    that again succeeds with the same nonce, port and address;
//  - encoding any payload (the input's first bytes read as IdPayload fields) gives an id that decodes to the same
//    nonce, port and address, refused only for port 0.
// A broken check aborts, which libFuzzer reports as a crash and saves the input.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "bootstrap/wire.h"
#include "fuzz/fuzz_check.h"

namespace sw = symmar::wire;

namespace {

bool sameEndpoint(const sw::IdPayload& a, const sw::IdPayload& b) {
  return a.nonce == b.nonce && a.port == b.port && a.addr == b.addr;
}

void checkDecode(const uint8_t* data, size_t size) {
  symmarUniqueId raw;
  memset(&raw, 0, sizeof(raw));
  memcpy(raw.internal, data, size < sizeof(raw.internal) ? size : sizeof(raw.internal));
  sw::IdPayload id;
  const char* why = "not set";
  const symmarResult_t res = sw::decodeId(raw, &id, &why);
  if (res != symmarSuccess) {
    FUZZ_CHECK(res == symmarInvalidArgument && why != nullptr);
    return;
  }
  FUZZ_CHECK(why == nullptr);
  FUZZ_CHECK(id.port != 0);
  symmarUniqueId again;
  sw::encodeId(id, &again);
  FUZZ_CHECK(memcmp(again.internal, raw.internal, sizeof(raw.internal)) == 0);
  sw::IdPayload back;
  why = "not set";
  FUZZ_CHECK(sw::decodeId(again, &back, &why) == symmarSuccess && why == nullptr);
  FUZZ_CHECK(sameEndpoint(back, id));
}

void checkEncode(const uint8_t* data, size_t size) {
  sw::IdPayload id;
  memset(&id, 0, sizeof(id));
  memcpy(&id, data, size < sizeof(id) ? size : sizeof(id));
  symmarUniqueId raw;
  sw::encodeId(id, &raw);
  sw::IdPayload back;
  const char* why = "not set";
  const symmarResult_t res = sw::decodeId(raw, &back, &why);
  if (id.port == 0) {
    FUZZ_CHECK(res == symmarInvalidArgument && why != nullptr);
    return;
  }
  FUZZ_CHECK(res == symmarSuccess && why == nullptr);
  FUZZ_CHECK(sameEndpoint(back, id));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  checkDecode(data, size);
  checkEncode(data, size);
  return 0;
}
