// Fresh random values that name one comm's shared objects (sockets, segments) or seed its probes.
// One recipe, so that no site draws fewer bits than another.
#pragma once
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <random>

#include "core/hash.h"

namespace symmar {

/// 64 unpredictable bits: two draws of the system's random device, mixed with the process id and
/// the clock so that even a deterministic random device gives different values in different
/// processes and at different times.
inline uint64_t freshNonce() {
  std::random_device rd;
  uint64_t h = fnv1aMix(kFnvOffset, (uint64_t{rd()} << 32) ^ rd());
  h = fnv1aMix(h, static_cast<uint64_t>(getpid()));
  return fnv1aMix(h, static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()));
}

/// What each use of a comm's nonce names: one nonce serves several objects without two of them
/// sharing a name.
enum class NonceUse : uint64_t { kHostHeap = 1, kGpuHeap, kGpuMulticast, kGpuHostStaging, kPeerProbe };

/// The value that names use's object of the comm whose nonce is base.
inline uint64_t nonceFor(uint64_t base, NonceUse use) { return fnv1aMix(base, static_cast<uint64_t>(use)); }

}  // namespace symmar
