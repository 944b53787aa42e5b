#include "host/inter_host.h"

#include <cstring>

#include "core/error.h"
#include "host/host_reduce.h"

namespace symmar {

InterHost::InterHost(const InterHostCarrier& carrier, int hosts, int host, int timeout_ms)
    : carrier_(carrier), hosts_(hosts), host_(host), timeout_ms_(timeout_ms), srcs_(static_cast<size_t>(hosts)) {}

InterHost::~InterHost() {
  if (carrier_.release) carrier_.release(carrier_.user);
}

void* InterHost::partial(size_t count, symmarDataType_t dtype) {
  const size_t record = sizeof(Header) + ((count * symmarTypeSize(dtype) + 15) & ~size_t{15});
  if (send_.size() < record) send_.resize(record);
  return send_.data() + sizeof(Header);
}

symmarResult_t InterHost::combine(void* dst, void* dst2, size_t count, symmarDataType_t dtype, symmarRedOp_t op,
                                  uint64_t sig) {
  const size_t payload = count * symmarTypeSize(dtype);
  const size_t record = sizeof(Header) + ((payload + 15) & ~size_t{15});
  partial(count, dtype);  // sized (the partial is already there)
  if (recv_.size() < record * static_cast<size_t>(hosts_)) recv_.resize(record * static_cast<size_t>(hosts_));
  const Header mine_header{sig, ++seq_, payload, 0};
  std::memcpy(send_.data(), &mine_header, sizeof(Header));
  std::memset(send_.data() + sizeof(Header) + payload, 0, record - sizeof(Header) - payload);  // padding
  clearThreadLastError();  // so only the engine's own report (if any) is quoted below
  const symmarResult_t res = carrier_.fn(send_.data(), recv_.data(), record, timeout_ms_, carrier_.user);
  if (res != symmarSuccess) {
    // A timeout and a mismatch keep their codes; any other engine failure is a lost peer to the comm.
    const symmarResult_t code = res == symmarTimeout || res == symmarInvalidUsage ? res : symmarPeerFailure;
    const std::string said = threadLastError();
    return fail(code, "inter-host stage over %s failed (%s)%s%s", carrier_.name.c_str(), symmarGetErrorString(res),
                said.empty() ? "" : ": ", said.c_str());
  }
  for (int h = 0; h < hosts_; ++h) {
    const unsigned char* rec = recv_.data() + static_cast<size_t>(h) * record;
    Header theirs;
    std::memcpy(&theirs, rec, sizeof(Header));
    if (h == host_ && std::memcmp(rec, send_.data(), record) != 0) {
      return fail(symmarInternalError, "inter-host stage over %s returned another record in this rank's place (host %d)",
                  carrier_.name.c_str(), h);
    }
    if (theirs.sig != sig || theirs.seq != seq_ || theirs.bytes != payload) {
      return fail(symmarInvalidUsage,
                  "collective mismatch across hosts: host %d made another call (count, dtype, op or algorithm) or "
                  "another number of calls than host %d; every rank must make the same calls in the same order",
                  h, host_);
    }
    srcs_[static_cast<size_t>(h)] = rec + sizeof(Header);
  }
  if (count) reduceRanks(dst, dst2, srcs_.data(), hosts_, count, dtype, op);
  return symmarSuccess;
}

}  // namespace symmar
