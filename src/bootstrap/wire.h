// The unique-id bootstrap's messages and their checks, as pure functions: every byte that comes
// from the wire or from a caller's id is judged here before use (and fuzzed: tests/fuzz/).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "symmar/symmar.h"

namespace symmar {
namespace wire {

constexpr uint32_t kIdMagic = 0x4d4d5953;  // "SYMM"
constexpr uint16_t kIdVersion = 2;         // 2: acks carry a reason; ids are single-use

/// What a unique id holds: rank 0's listener and the comm's nonce, with a checksum.
struct IdPayload {
  uint32_t magic;
  uint16_t version;
  uint16_t port;  // host order
  uint32_t addr;  // network order
  uint32_t reserved;
  uint64_t nonce;
  uint64_t checksum;
};
static_assert(sizeof(IdPayload) <= SYMMAR_UNIQUE_ID_BYTES, "id payload must fit");

/// Fills raw with id (checksum computed here, the rest of raw zeroed).
void encodeId(IdPayload id, symmarUniqueId* raw);
/// symmarInvalidArgument unless raw is an intact id of this version; *why then says what is wrong.
symmarResult_t decodeId(const symmarUniqueId& raw, IdPayload* id, const char** why);

/// First message of a joining rank.
struct Hello {
  uint32_t magic;
  uint16_t version;
  uint16_t reserved;
  int32_t rank;
  int32_t nranks;
  uint64_t nonce;
};

/// What rank 0 makes of a hello.
enum class HelloVerdict {
  kStray,      ///< not for this id (wrong magic, version or nonce): close without a word
  kAccept,     ///< a rank of this comm not seen before
  kWrongSize,  ///< proves the nonce but names another world size
  kBadRank,    ///< proves the nonce but its rank is outside 1..nranks-1
  kDuplicate,  ///< proves the nonce but its rank has already joined
};
/// taken[r] is true when rank r already joined (taken[0] is rank 0; ranks past its end count as taken).
HelloVerdict judgeHello(const Hello& h, uint64_t nonce, int nranks, const std::vector<bool>& taken);

/// Why rank 0 refused a rank (or 0 when it accepted it).
enum AckReason : int32_t {
  kAckOk = 0,
  kAckNotAllJoined = 1,  ///< not every rank joined within rank 0's timeout
  kAckDuplicate = 2,     ///< two processes joined as the same rank: the id is used by two comms
  kAckWrongSize = 3,     ///< ranks disagree on the world size
  kAckBadRank = 4,       ///< a rank outside 1..nranks-1
  kAckComplete = 5,      ///< the id's comm had already formed: ids are single-use
  kAckOtherFailure = 6,  ///< rank 0 failed for another reason
  kAckNumReasons
};
/// Rank 0's answer to a hello.
struct Ack {
  uint32_t magic;
  int32_t result;  // symmarSuccess or the failure code
  int32_t reason;  // AckReason
  int32_t nranks;
};
Ack makeAck(symmarResult_t result, AckReason reason, int nranks);
/// Judges rank 0's answer: symmarSuccess when it accepted this rank into a comm of nranks;
/// otherwise the code to return, with *why saying what happened.
symmarResult_t judgeAck(const Ack& a, int nranks, std::string* why);
/// Text for a refusal reason.
const char* ackReasonText(int32_t reason);

}  // namespace wire
}  // namespace symmar
