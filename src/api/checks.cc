#include "api/checks.h"

#include <cstdint>

#include "core/error.h"
#include "core/names.h"

namespace symmar {

symmarResult_t checkRequest(size_t count, int dtype, int op, const char* fn) {
  if (!validDtype(dtype)) return fail(symmarInvalidArgument, "%s: invalid dtype %d", fn, dtype);
  if (!validOp(op)) return fail(symmarInvalidArgument, "%s: invalid op %d", fn, op);
  const auto dt = static_cast<symmarDataType_t>(dtype);
  if (count > SIZE_MAX / symmarTypeSize(dt)) {
    return fail(symmarInvalidArgument, "%s: count %zu of %s overflows the byte size", fn, count, dtypeName(dt));
  }
  return symmarSuccess;
}

symmarResult_t checkBuffers(const void* send, void* recv, size_t count, symmarDataType_t dtype, const char* fn) {
  if (!send || !recv) return fail(symmarInvalidArgument, "%s: sendbuf and recvbuf must not be NULL", fn);
  const size_t elem = symmarTypeSize(dtype);
  uintptr_t s = reinterpret_cast<uintptr_t>(send), r = reinterpret_cast<uintptr_t>(recv);
  if (s % elem || r % elem) {
    return fail(symmarInvalidArgument, "%s: buffers must be aligned to the %zu-byte element size", fn, elem);
  }
  const size_t bytes = count * elem;
  if (s != r && s < r + bytes && r < s + bytes) {
    return fail(symmarInvalidArgument, "%s: sendbuf and recvbuf overlap without being equal (in place needs equal)", fn);
  }
  return symmarSuccess;
}

symmarResult_t checkScatterGatherBuffers(Collective coll, const void* send, void* recv, size_t count,
                                         symmarDataType_t dtype, int rank, int nranks, const char* fn) {
  if (!send || !recv) return fail(symmarInvalidArgument, "%s: sendbuf and recvbuf must not be NULL", fn);
  const size_t elem = symmarTypeSize(dtype);
  if (count > SIZE_MAX / elem / static_cast<size_t>(nranks)) {
    return fail(symmarInvalidArgument, "%s: %d ranks x %zu %s elements overflow the byte size", fn, nranks, count,
                dtypeName(dtype));
  }
  const uintptr_t s = reinterpret_cast<uintptr_t>(send), r = reinterpret_cast<uintptr_t>(recv);
  if (s % elem || r % elem) {
    return fail(symmarInvalidArgument, "%s: buffers must be aligned to the %zu-byte element size", fn, elem);
  }
  const size_t block = count * elem, whole = block * static_cast<size_t>(nranks);
  const bool scatter = coll == Collective::kReduceScatter;
  const uintptr_t big = scatter ? s : r, small = scatter ? r : s;  // the nranks-block buffer and the one-block one
  if (small == big + static_cast<size_t>(rank) * block) return symmarSuccess;  // in place
  if (small < big + whole && big < small + block) {
    return fail(symmarInvalidArgument,
                "%s: sendbuf and recvbuf overlap without being in place (in place needs %s == %s + rank * count)", fn,
                scatter ? "recvbuf" : "sendbuf", scatter ? "sendbuf" : "recvbuf");
  }
  return symmarSuccess;
}

}  // namespace symmar
