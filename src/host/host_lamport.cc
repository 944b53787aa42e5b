// The lamport one-shot on the host (the twin of cuda/lamport.cu): no barrier. A rank stores, into
// its slot of every peer's current lamport buffer (and of its own), a header with the call's
// signature (the slot's last vector), its input word by word, then a trailer with the signature
// right after the data (a release store). A reader spins on its own memory: the header (at a fixed
// place, so a peer whose call has another count is recognised at once), then the trailer, acquired;
// it checks that no data word holds the empty pattern and reduces the slots in rank order. Spinning
// on the two marks rather than on each data word keeps the reader off the cache lines the writer is
// still filling. Three buffers rotate; a call clears the buffer its previous call read, which no
// peer writes again before this rank's next call has published its data (that publication orders
// the clear first). The signature holds the call's number in the comm's whole call sequence
// (the call number, which barrier calls advance too), so a lamport call never pairs with a peer's lamport call
// from another place in the sequence. The ring index is kept apart from that wrapping number: 2^32
// is no multiple of 3.
//
// Reduce-scatter and all-gather take the same exchange with each peer's own payload (its block of
// the input, or the whole input) in its raw bits: the acquired trailer is what says the data
// arrived, so no data word needs to differ from the empty pattern, and a copy stays exact for every
// dtype. The allreduce keeps the travelling encoding: the GPU twin has no trailer and waits on the
// data words themselves, and the host reduces the same values it does.
#include <cstdint>
#include <cstring>

#include "core/error.h"
#include "host/host_backend.h"
#include "host/host_reduce.h"

namespace symmar {
namespace {

constexpr size_t kHeaderWord = ShmHeap::kLamportHeaderWord;

/// Word w of the input as it travels: no 16-bit half (f16/bf16) or word (f32) equal to the empty
/// pattern; the bytes past the input in the last word are +0.0.
inline uint32_t travellingWord(const char* send, size_t bytes, size_t w, size_t elem) {
  uint32_t x = 0;
  const size_t at = w * 4;
  if (at + 4 <= bytes) {
    std::memcpy(&x, send + at, 4);  // a fixed size: one load
  } else {
    std::memcpy(&x, send + at, bytes - at);
  }
  if (elem == 4) return x == sched::kLamportEmpty ? 0x80000000u : x;  // the one f32 denormal: -0.0
  if ((x & 0xffffu) == 0x8000u) x &= 0xffff0000u;                     // f16/bf16 -0.0: +0.0
  if ((x >> 16) == 0x8000u) x &= 0x0000ffffu;
  return x;
}

bool empty(const uint32_t* w) { return __atomic_load_n(w, __ATOMIC_ACQUIRE) == sched::kLamportEmpty; }

}  // namespace

symmarResult_t HostBackend::lamportExchange(const LamportMessage& m) {
  const uint32_t call = sync_->takeCallNumber();  // wraps: only compared for equality (the signature) and order
  const int buf = sync_->lamportBuffer();
  const size_t words = (m.bytes + 3) / 4;
  const size_t trailer = sched::lamportTrailerWord(m.bytes);
  uint32_t sig[4];
  const uint64_t numbered = numberedSignature(m.signature, call);
  for (int k = 0; k < 4; ++k) sig[k] = sched::lamportHeaderWord(numbered, k);

  // Publish: every peer's slot for this rank (and this rank's own slot of its own buffer when the
  // message travels encoded, so the reduction reads every rank's input alike, which keeps all
  // ranks' bits equal).
  for (int i = m.travelling ? 0 : 1; i < world_; ++i) {
    const int p = (rank_ + i) % world_;
    const char* payload = m.send + static_cast<size_t>(p) * m.stride;
    uint32_t* slot = heap_->lamportSlot(p, buf, rank_);
    for (int k = 0; k < 4; ++k) __atomic_store_n(slot + kHeaderWord + k, sig[k], __ATOMIC_RELEASE);
    if (m.travelling) {
      for (size_t w = 0; w < words; ++w) {
        __atomic_store_n(slot + w, travellingWord(payload, m.bytes, w, m.elem), __ATOMIC_RELAXED);
      }
    } else if (m.bytes > 0) {
      std::memcpy(slot, payload, m.bytes);  // read only after the trailer's acquire
    }
    for (int k = 0; k < 3; ++k) __atomic_store_n(slot + trailer + k, sig[k], __ATOMIC_RELAXED);
    __atomic_store_n(slot + trailer + 3, sig[3], __ATOMIC_RELEASE);  // publishes everything above
  }

  for (int i = 1; i < world_; ++i) {
    const int p = (rank_ + i) % world_;
    const uint32_t* slot = heap_->lamportSlot(rank_, buf, p);
    // The header, or the peer at a barrier this rank is not at (its call is not a lamport call):
    // the flag first, then the header, so a peer that finished this call and went on is not taken
    // for one that skipped it.
    bool other_call = false;
    const uint32_t* flag = heap_->flag(p, 0, sched::kSlotStart);
    symmarResult_t res = sync_->waitUntil(
        p,
        [&] {
          if (!empty(slot + kHeaderWord + 3)) return true;
          other_call = !sched::epochReached(sync_->epoch(), __atomic_load_n(flag, __ATOMIC_ACQUIRE)) &&
                       empty(slot + kHeaderWord + 3);
          return other_call;
        },
        "a lamport call");
    if (res == symmarSuccess && (other_call || std::memcmp(slot + kHeaderWord, sig, sizeof(sig)) != 0)) {
      // The buffers now hold data of calls that did not match: no later call of this comm may use
      // them. Peers learn it from this rank's failed state; this rank refuses every later call.
      return sync_->breakComm(
          fail(symmarInvalidUsage,
               "collective mismatch: rank %d's call (%s) differs from rank %d's lamport call in collective, count, "
               "dtype, op or place in the order; every rank must make the same calls in the same order",
               commRank(p), other_call ? "not a lamport call" : "another lamport call", commRank(rank_)),
          sched::nextEpoch(sync_->epoch()));
    }
    if (res == symmarSuccess) {
      res = sync_->waitUntil(p, [slot, trailer] { return !empty(slot + trailer + 3); }, "the end of a lamport call");
    }
    if (res != symmarSuccess) return sync_->failCall(res);
    bool complete = std::memcmp(slot + trailer, sig, sizeof(sig)) == 0;
    for (size_t w = 0; m.travelling && w < words; ++w) complete = complete && slot[w] != sched::kLamportEmpty;
    if (!complete) {  // a word still empty was never written
      return sync_->breakComm(fail(symmarPeerFailure, "rank %d's lamport data is incomplete or corrupt", commRank(p)),
                              sched::nextEpoch(sync_->epoch()));
    }
    srcs_[p] = slot;
  }
  // A peer publishes its data before it waits, so data can be here from a peer that then gave up
  // on this call (timeout, lost peer) and returned a failure: completing it would succeed where
  // that peer did not. Looked at once every peer's data arrived, right before it is used.
  for (int i = 1; i < world_; ++i) {
    symmarResult_t res = sync_->peerFailedCall((rank_ + i) % world_, call);
    if (res != symmarSuccess) return sync_->failCall(res);
  }
  srcs_[rank_] = heap_->lamportSlot(rank_, buf, rank_);
  return symmarSuccess;
}

void HostBackend::retireLamportBuffer(size_t bytes) {
  // Clear what the previous call left in the buffer it read: every slot's data, trailer and header.
  const int buf = sync_->lamportBuffer();
  const int prev = (buf + sched::kLamportBuffers - 1) % sched::kLamportBuffers;
  for (int p = 0; p < world_; ++p) {
    uint32_t* slot = heap_->lamportSlot(rank_, prev, p);
    for (size_t w = 0; w < lamport_used_[prev]; ++w) slot[w] = sched::kLamportEmpty;
    for (int k = 0; k < 4; ++k) slot[kHeaderWord + k] = sched::kLamportEmpty;
  }
  lamport_used_[buf] = sched::lamportTrailerWord(bytes) + 4;  // data and trailer
  sync_->advanceLamportBuffer();
}

symmarResult_t HostBackend::runLamport(const Call& c) {
  // The dtype and the size were checked against lamport's record (plan/algorithms.cc) before the call.
  SYMMAR_CHECK(lamportExchange({c.signature, c.send, 0, c.count * c.elem, c.elem, true}));
  reduceRanks(c.recv, nullptr, srcs_.data(), world_, c.count, c.dtype, c.op);
  retireLamportBuffer(c.count * c.elem);
  return combineFromOutput(c, 0, c.count, nullptr);
}

symmarResult_t HostBackend::runLamportScatterGather(const ScatterGatherCall& c) {
  const size_t block = c.count * c.elem();
  const char* send = static_cast<const char*>(c.send);
  char* recv = static_cast<char*>(c.recv);
  const bool scatter = c.coll == Collective::kReduceScatter;
  // Reduce-scatter: peer p gets this rank's block p; all-gather: every peer gets the input.
  SYMMAR_CHECK(lamportExchange({callSignature(c), send, scatter ? block : 0, block, c.elem(), false}));
  if (scatter) {
    srcs_[rank_] = send + static_cast<size_t>(rank_) * block;  // this rank's own block: from its input
    // In place the output is this rank's own input block: each element is read before it is written.
    reduceRanks(recv, nullptr, srcs_.data(), world_, c.count, c.dtype, c.op);
  } else {
    for (int p = 0; p < world_; ++p) {
      char* out = recv + static_cast<size_t>(p) * block;
      const char* in = p == rank_ ? send : static_cast<const char*>(srcs_[p]);
      if (out != in && block > 0) copyBytes(out, in, block);
    }
  }
  retireLamportBuffer(block);
  return symmarSuccess;
}

}  // namespace symmar
