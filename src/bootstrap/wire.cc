#include "bootstrap/wire.h"

#include <cstdint>
#include <cstring>

#include "core/hash.h"

namespace symmar {
namespace wire {
namespace {

uint64_t idChecksum(const IdPayload& id) { return fnv1a(&id, offsetof(IdPayload, checksum)); }

}  // namespace

void encodeId(IdPayload id, symmarUniqueId* raw) {
  id.magic = kIdMagic;
  id.version = kIdVersion;
  id.reserved = 0;
  id.checksum = idChecksum(id);
  memset(raw->internal, 0, sizeof(raw->internal));
  memcpy(raw->internal, &id, sizeof(id));
}

symmarResult_t decodeId(const symmarUniqueId& raw, IdPayload* id, const char** why) {
  memcpy(id, raw.internal, sizeof(*id));
  *why = nullptr;
  for (size_t i = sizeof(*id); i < SYMMAR_UNIQUE_ID_BYTES && !*why; ++i) {
    if (raw.internal[i] != 0) *why = "trailing bytes set";
  }
  if (*why) {
  } else if (id->magic != kIdMagic) {
    *why = "not a symmar id: bad magic";
  } else if (id->version != kIdVersion) {
    *why = "made by another symmar version";
  } else if (id->checksum != idChecksum(*id)) {
    *why = "checksum mismatch";
  } else if (id->port == 0 || id->reserved != 0) {
    *why = "port 0 or reserved bits set";
  }
  return *why ? symmarInvalidArgument : symmarSuccess;
}

HelloVerdict judgeHello(const Hello& h, uint64_t nonce, int nranks, const std::vector<bool>& taken) {
  if (h.magic != kIdMagic || h.version != kIdVersion || h.nonce != nonce) return HelloVerdict::kStray;
  if (h.nranks != nranks) return HelloVerdict::kWrongSize;
  if (h.rank <= 0 || h.rank >= nranks) return HelloVerdict::kBadRank;
  if (static_cast<size_t>(h.rank) >= taken.size() || taken[static_cast<size_t>(h.rank)])
    return HelloVerdict::kDuplicate;
  return HelloVerdict::kAccept;
}

Ack makeAck(symmarResult_t result, AckReason reason, int nranks) {
  return Ack{kIdMagic, static_cast<int32_t>(result), static_cast<int32_t>(reason), nranks};
}

const char* ackReasonText(int32_t reason) {
  switch (reason) {
    case kAckNotAllJoined:
      return "not every rank joined within rank 0's timeout";
    case kAckDuplicate:
      return "two processes joined as the same rank: one unique id was given to more than one comm (make one id "
             "per comm)";
    case kAckWrongSize:
      return "ranks passed different nranks for this id";
    case kAckBadRank:
      return "a rank outside 1..nranks-1 tried to join";
    case kAckComplete:
      return "the comm of this id had already formed: a unique id serves exactly one comm (make one id per comm)";
    case kAckOtherFailure:
      return "rank 0 failed while forming the comm";
    default:
      return "unknown reason";
  }
}

symmarResult_t judgeAck(const Ack& a, int nranks, std::string* why) {
  if (a.magic != kIdMagic) {
    *why = "rank 0 answered with a malformed message";
    return symmarSystemError;
  }
  if (a.result == symmarSuccess && a.reason == kAckOk && a.nranks == nranks) return symmarSuccess;
  // Only codes this library defines are returned; anything else from the wire is malformed.
  const bool known =
      a.result > symmarSuccess && a.result < symmarNumResults && a.reason > kAckOk && a.reason < kAckNumReasons;
  if (!known) {
    *why = "rank 0 answered with an invalid result or reason";
    return symmarSystemError;
  }
  *why = std::string("rank 0 refused this rank: ") + ackReasonText(a.reason);
  return static_cast<symmarResult_t>(a.result);
}

}  // namespace wire
}  // namespace symmar
