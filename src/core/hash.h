// FNV-1a 64, the one hash behind every value ranks compare with each other: the unique-id
// checksum, the process identity, the per-call signature, the plan fingerprint and the tests'
// output digests. One definition, so the sites cannot drift apart.
#pragma once
#include <cstddef>
#include <cstdint>

namespace symmar {

// The offset basis differs from the published one (14695981039346656037, one digit longer). The
// hash only has to agree between ranks and stay stable across versions, which it does, so it stays.
constexpr uint64_t kFnvOffset = 1469598103934665603ull;
constexpr uint64_t kFnvPrime = 1099511628211ull;

/// FNV-1a over bytes, one byte per step; h continues an earlier hash.
inline uint64_t fnv1a(const void* data, size_t bytes, uint64_t h = kFnvOffset) {
  const unsigned char* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < bytes; ++i) h = (h ^ p[i]) * kFnvPrime;
  return h;
}

/// One FNV-1a step over a whole 64-bit value (not its 8 bytes): how a sequence of fields is
/// hashed, e.g. h = fnv1aMix(fnv1aMix(kFnvOffset, a), b). Device code uses it too (lamport trailers).
#if defined(__CUDACC__)
__host__ __device__
#endif
inline constexpr uint64_t fnv1aMix(uint64_t h, uint64_t value) { return (h ^ value) * kFnvPrime; }

}  // namespace symmar
