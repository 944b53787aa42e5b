// Element-wise reduction of N rank buffers on the CPU: dst[i] = op(src[0][i], ..., src[N-1][i]),
// always in rank order, fp32 accumulation for fp16/bf16 (rounded once at the end), with SIMD chosen
// at run time (simd_reduce.h). The element conversions round as core/numeric.h does; the result is
// the same bits on every CPU. Sum NaNs (acc + x): x quieted if x is NaN, else acc quieted, or the
// negative default NaN for inf - inf; max/min: acc > x ? acc : x and acc < x ? acc : x; int32 sums wrap.
#pragma once
#include <cstddef>

#include "symmar/symmar.h"

namespace symmar {

/// Reduces n elements of nsrc buffers into dst, and into dst2 as well when it is not null (one
/// pass writes both: two-shot's owner keeps its slice and publishes it). dst may alias a source.
void reduceRanks(void* dst, void* dst2, const void* const* srcs, int nsrc, size_t n, symmarDataType_t dtype,
                 symmarRedOp_t op);

/// reduceRanks for a dst2 whose lines a peer read in the call before (two-shot publishing at the
/// start of a staging half, not in a slot of the staging ring): every store to such a line waits
/// for the peer's core to give it up, so a 16-bit reduction that fits in cache stores in bursts.
/// The same bits as reduceRanks.
void reduceRanksPublishingToReadLines(void* dst, void* dst2, const void* const* srcs, int nsrc, size_t n,
                                      symmarDataType_t dtype, symmarRedOp_t op);

/// The bytes of one core's L2 cache as Linux lists it under cache_dir (index*/level, type, size:
/// the level-2 data or unified entry), or 0 where it lists none. glibc's sysconf answers on x86 but
/// gives 0 on aarch64, where this is how the L2 of a Graviton or Grace core is found.
size_t l2CacheBytesFromSysfs(const char* cache_dir);

/// Copies bytes from src to dst (no overlap), as memcpy would but without its one slow case here.
/// glibc copies 2 KiB to a few MiB with `rep movsb` on CPUs with fast short rep-mov (FSRM), and on
/// AMD Zen that runs at 4-6 GB/s instead of 60-180 when dst is 1-31 bytes past src modulo 4 KiB
/// (measured on a 2-core EPYC VM, glibc 2.36, 8 KiB to 256 KiB). A page-aligned heap slot and a
/// caller's buffer from malloc (16 bytes past a page) are exactly that, so the copies between the
/// heap and callers' buffers in the host data path go through here, which takes vector loads and
/// stores in that case and memcpy in every other.
void copyBytes(void* dst, const void* src, size_t bytes);

}  // namespace symmar
