#include "host/host_reduce.h"

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

#include "host/simd_reduce.h"

namespace symmar {

namespace {

// A 16-bit reduction that publishes its result into lines its peers read the call before (two-shot's
// owner outside the staging ring) runs block by block while its data fits in half the L2: each
// block is reduced into a scratch block in L1, then copied to both destinations. Reduced straight
// into them, the conversions space the stores out, and each store to a line a peer read needs that
// line back from the peer's cache (docs/performance/host-allreduce.md, "What limits each size"); copied out in one
// burst, those transfers overlap. 2 ranks, two-shot, 16-256 KiB: bf16 took 1.06-1.15x less time,
// and without the staging ring bf16 per byte was 0.93-1.05x float32's blocked against 0.75-0.81x
// straight. In the ring, where no peer read the lines, the blocks only cost: bf16 per byte was
// 0.75-0.86x float32's blocked and 0.94-1.01x straight (2 ranks, 4 KiB-1 MiB).
// Past the L2 the extra pass costs more than it saves (bf16 1.4x slower at 1 MiB), and float32,
// whose loop stores at the copy's pace already, was 7-19% slower blocked.
constexpr size_t kScratchBytes = 2048;
constexpr int kMaxBlockSources = 64;

bool reducesBlockwise(const void* dst2, int nsrc, size_t n, symmarDataType_t dtype) {
  if (dst2 == nullptr || nsrc > kMaxBlockSources || (dtype != symmarBfloat16 && dtype != symmarFloat16)) return false;
  static const size_t half_l2 = [] {
    const long from_libc = sysconf(_SC_LEVEL2_CACHE_SIZE);
    const size_t l2 = from_libc > 0 ? static_cast<size_t>(from_libc)
                                    : l2CacheBytesFromSysfs("/sys/devices/system/cpu/cpu0/cache");
    return (l2 > 0 ? l2 : size_t{1} << 20) / 2;  // 1 MiB where nothing says: a guess, not a measure
  }();
  return static_cast<size_t>(nsrc + 2) * n * 2 <= half_l2;  // the sources and the two destinations
}

void reduceBlockwise(void* dst, void* dst2, const void* const* srcs, int nsrc, size_t n, symmarDataType_t dtype,
                     symmarRedOp_t op) {
  alignas(4096) static thread_local char area[2 * 4096];
  // The scratch block sits half a page from dst modulo 4 KiB, so the copy's loads from it never
  // share an address's low 12 bits with its stores to dst (4K aliasing stalls loads behind stores).
  const uintptr_t dst_page_offset = reinterpret_cast<uintptr_t>(dst) & 4095;
  char* scratch = area + ((dst_page_offset + 2048) & 4095 & ~uintptr_t{63});
  const void* block_srcs[kMaxBlockSources];
  const size_t elem = 2, per_block = kScratchBytes / elem;
  for (size_t b = 0; b < n; b += per_block) {
    const size_t m = n - b < per_block ? n - b : per_block;
    for (int r = 0; r < nsrc; ++r) block_srcs[r] = static_cast<const char*>(srcs[r]) + b * elem;
    simdReduceRanks(scratch, nullptr, block_srcs, nsrc, m, dtype, op);
    copyBytes(static_cast<char*>(dst) + b * elem, scratch, m * elem);
    copyBytes(static_cast<char*>(dst2) + b * elem, scratch, m * elem);
  }
}

/// The first line of path, without its newline; empty where it cannot be read.
std::string firstLine(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "r");
  if (!f) return "";
  char line[64] = "";
  if (!std::fgets(line, sizeof line, f)) line[0] = 0;
  std::fclose(f);
  line[std::strcspn(line, "\n")] = 0;
  return line;
}

}  // namespace

size_t l2CacheBytesFromSysfs(const char* cache_dir) {
  for (int index = 0; index < 16; ++index) {
    const std::string entry = std::string(cache_dir) + "/index" + std::to_string(index) + "/";
    const std::string level = firstLine(entry + "level");
    if (level.empty()) break;
    const std::string type = firstLine(entry + "type");
    if (level != "2" || (type != "Unified" && type != "Data")) continue;
    unsigned long long size = 0;
    char unit = 0;
    const int got = std::sscanf(firstLine(entry + "size").c_str(), "%llu%c", &size, &unit);
    if (got < 1 || size == 0) return 0;
    const unsigned long long scale = got == 1 ? 1 : unit == 'K' ? 1ull << 10 : unit == 'M' ? 1ull << 20 : 0;
    if (scale == 0 || size > (1ull << 40) / scale) return 0;  // an unknown unit or an absurd size: unknown
    return static_cast<size_t>(size * scale);
  }
  return 0;
}

// One implementation: the Highway kernels, at the best SIMD target of this CPU. Ranks on CPUs of
// different generations get the same bits (simd_reduce.cc says why), so there is no scalar twin to
// keep in step; Highway's portable EMU128 target is the fallback below SSE4. Each element's result
// depends on that element's inputs only, so blocks give the same bits.
void reduceRanks(void* dst, void* dst2, const void* const* srcs, int nsrc, size_t n, symmarDataType_t dtype,
                 symmarRedOp_t op) {
  simdReduceRanks(dst, dst2, srcs, nsrc, n, dtype, op);
}

void reduceRanksPublishingToReadLines(void* dst, void* dst2, const void* const* srcs, int nsrc, size_t n,
                                      symmarDataType_t dtype, symmarRedOp_t op) {
  if (reducesBlockwise(dst2, nsrc, n, dtype)) return reduceBlockwise(dst, dst2, srcs, nsrc, n, dtype, op);
  simdReduceRanks(dst, dst2, srcs, nsrc, n, dtype, op);
}

// memcpy, except where glibc's `rep movsb` meets the slow case (host_reduce.h): a size it copies
// with rep movsb (2 KiB and up; from 4 MiB on it streams with non-temporal stores instead) and a
// destination 1-63 bytes past the source modulo 4 KiB (measured slow for 1-31, 63 kept as margin).
// Elsewhere rep movsb is the faster copy here, also between the processes' caches, so it stays.
void copyBytes(void* dst, const void* src, size_t bytes) {
  constexpr size_t kRepMovsbFrom = 2 << 10;
  constexpr size_t kRepMovsbBelow = 4 << 20;
  const uintptr_t distance = (reinterpret_cast<uintptr_t>(dst) - reinterpret_cast<uintptr_t>(src)) & 4095;
  if (bytes >= kRepMovsbFrom && bytes < kRepMovsbBelow && distance >= 1 && distance < 64) {
    simdCopy(dst, src, bytes);
  } else if (bytes > 0) {
    std::memcpy(dst, src, bytes);
  }
}

}  // namespace symmar
