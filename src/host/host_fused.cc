// The fused allreduce + residual add + RMSNorm (+ FP8) on the host, in the two forms of the plain
// allreduce, split by rows (a row is normalised as a whole, by one rank):
//  - one-shot: every rank stages its rows, then reduces all rows itself in rank order and finishes
//    them (add, norm, fp8). One barrier per chunk of rows; staging halves alternate.
//  - two-shot: every rank stages the rows its peers own; each reduces and finishes the rows it owns
//    (its own part read from its input) and publishes residual_out, norm_out (and fp8_out) rows in
//    its other staging half in the same pass; after an end barrier every rank copies the other
//    owners' rows.
// Each row is finished by exactly one code path with one summation order, so all ranks hold the
// same bits, whichever of a rank's threads (SYMMAR_HOST_THREADS, symmarCommSetHostThreads) takes
// it: the copies and the rows of a chunk split over them, 64 KiB of rows a thread or more. (The GPU's two-shot publishes the sums only and every rank finishes every row: there
// the arithmetic is nearly free. On a CPU core it is not: that form, tried here, took 1.15-1.4x
// longer at 4-256 tokens of hidden 7168 bf16, 2 ranks, than finishing a row once and copying it.)
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "core/numeric.h"
#include "host/add_rms_norm.h"
#include "host/host_backend.h"
#include "host/host_reduce.h"
#include "host/simd_reduce.h"
#include "plan/planner.h"

namespace symmar {

symmarResult_t HostBackend::allReduceAddRmsNorm(const AddRmsNormCall& c) {
  SYMMAR_CHECK(checkCallable(c.stream));
  symmarAlgo_t algo = c.algo;
  // The norm needs the sum over every host, which the fused schedules (one host's ranks) lack.
  if (placement_.hosts > 1) return fail(symmarUnsupported, "host backend: no fused form across hosts");
  if (c.tokens == 0 || c.hidden == 0) {
    // Nothing to move (and no row size to divide by), but the call still takes part like a count-0
    // allreduce: its signature meets the peers' at a barrier, so a rank that skipped the call or
    // made another is caught instead of being paired with its peers' next call.
    return matchCall(callSignature(c, algo));
  }
  const size_t elem = symmarTypeSize(c.dtype);
  const size_t row_bytes = c.hidden * elem;
  const bool fp8 = c.fp8_out != nullptr;
  const size_t staging_bytes = heap_->stagingBytes();
  // The row kernels store element words into the published parts: each part is vector-aligned.
  const size_t form_row_bytes[2] = {row_bytes, sched::hostFusedPublishedRowBytes(c.hidden, elem, fp8)};
  SYMMAR_CHECK(fitAddRmsNormForm(c, form_row_bytes, sched::stagingHalfBytes(staging_bytes), &algo));
  // > 0: the form's row fits a half (fitAddRmsNormForm).
  const size_t rows_per_chunk = sched::stagingHalfBytes(staging_bytes) / form_row_bytes[algo == symmarAlgoTwoShot];
  const size_t out_row_bytes = form_row_bytes[1];
  const size_t part_bytes = sched::fusedPartBytes(row_bytes);
  const char* input = static_cast<const char*>(c.input);
  const size_t chunks = (c.tokens + rows_per_chunk - 1) / rows_per_chunk;
  // Both forms stage in their slot of the staging ring, as the allreduce does: the slot holds what
  // the call writes into either half, the two-shot's published rows being the larger part.
  const size_t half_row_bytes = algo == symmarAlgoTwoShot ? out_row_bytes : row_bytes;
  const size_t shift = stagingShift(std::min(c.tokens, rows_per_chunk) * half_row_bytes);
  const auto staging = [&](int p, int half) { return heap_->staging(p, half) + shift; };
  for (size_t k = 0; k < chunks; ++k) {
    const size_t r0 = k * rows_per_chunk;
    const size_t rows = c.tokens - r0 < rows_per_chunk ? c.tokens - r0 : rows_per_chunk;
    const int in_half = takeWriteHalf();
    // The two-shot's peers read only the rows they own, so this rank's own rows stay in its input
    // (the one-shot's peers read every row: `mine` is empty and all are staged).
    const sched::Range mine =
        algo == symmarAlgoTwoShot ? sched::rankSlice(rows, world_, rank_, 1) : sched::Range{rows, rows};
    const char* chunk_in = input + r0 * row_bytes;
    char* staged = staging(rank_, in_half);
    // Streamed where plain writes were slow lately (staging_writes.h), and then the two-shot's
    // published rows are streamed too; otherwise the row kernel stores them as it finishes them.
    const bool stream = stageChunk((rows - mine.size()) * row_bytes, [&](auto copy) {
      const size_t tail = mine.end * row_bytes;
      inParts(mine.begin * row_bytes, 1, [&](int, size_t b, size_t n) { copy(staged + b, chunk_in + b, n); });
      inParts((rows - mine.end) * row_bytes, 1,
              [&](int, size_t b, size_t n) { copy(staged + tail + b, chunk_in + tail + b, n); });
    });
    SYMMAR_CHECK(sync_->barrier(sched::kSlotStart, sched::kStagedInput, k == 0 ? callSignature(c, algo) : 0));
    // Row r from every rank's rows, summed in rank order; this rank's own row from its input,
    // still in its cache (where the staged copy may have been streamed past it).
    const auto finishRow = [&](int part, size_t r, const AddRmsNormRowCopy* copy) {
      const void** srcs = sourcesOfPart(part);
      for (int p = 0; p < world_; ++p) srcs[p] = staging(p, in_half) + r * row_bytes;
      srcs[rank_] = chunk_in + r * row_bytes;
      finishAddRmsNormRow(c, r0 + r, srcs, world_, copy);
    };
    if (algo != symmarAlgoTwoShot) {
      inParts(rows, row_bytes, [&](int part, size_t b, size_t n) {
        for (size_t r = b; r < b + n; ++r) finishRow(part, r, nullptr);
      });
      last_read_half_ = in_half;
      continue;
    }
    // Two-shot: this rank's rows of the chunk, finished into its outputs and published in the
    // same pass.
    const int out_half = in_half ^ 1;
    char* pub = staging(rank_, out_half);
    inParts(mine.size(), row_bytes, [&](int part, size_t b, size_t n) {
      for (size_t r = mine.begin + b; r < mine.begin + b + n; ++r) {
        char* row_pub = pub + r * out_row_bytes;
        if (!stream) {
          const AddRmsNormRowCopy copy{row_pub, row_pub + part_bytes, row_pub + 2 * part_bytes};
          finishRow(part, r, &copy);
          continue;
        }
        // Finished into the outputs, then streamed from there (in cache) to staging: a plain store
        // to a line the peer read before waits for that line, which is what made the staged write slow.
        finishRow(part, r, nullptr);
        simdStreamCopy(row_pub, static_cast<const char*>(c.residual_out) + (r0 + r) * row_bytes, row_bytes);
        simdStreamCopy(row_pub + part_bytes, static_cast<const char*>(c.norm_out) + (r0 + r) * row_bytes, row_bytes);
        if (fp8) {
          simdStreamCopy(row_pub + 2 * part_bytes, static_cast<const char*>(c.fp8_out) + (r0 + r) * c.hidden,
                         c.hidden);
        }
      }
    });
    SYMMAR_CHECK(sync_->barrier(sched::kSlotEnd));
    for (int i = 1; i < world_; ++i) {
      const int p = (rank_ + i) % world_;
      const sched::Range s = sched::rankSlice(rows, world_, p, 1);
      const char* theirs = staging(p, out_half);
      inParts(s.size(), row_bytes, [&](int, size_t b, size_t n) {
        for (size_t r = s.begin + b; r < s.begin + b + n; ++r) {
          const char* row_pub = theirs + r * out_row_bytes;
          copyBytes(static_cast<char*>(c.residual_out) + (r0 + r) * row_bytes, row_pub, row_bytes);
          copyBytes(static_cast<char*>(c.norm_out) + (r0 + r) * row_bytes, row_pub + part_bytes, row_bytes);
          if (fp8) copyBytes(static_cast<char*>(c.fp8_out) + (r0 + r) * c.hidden, row_pub + 2 * part_bytes, c.hidden);
        }
      });
    }
    last_read_half_ = out_half;
  }
  return symmarSuccess;
}

symmarResult_t HostBackend::addRmsNormRows(const AddRmsNormCall& c, const void* sums) {
  const size_t row_bytes = c.hidden * symmarTypeSize(c.dtype);
  inParts(c.tokens, row_bytes, [&](int, size_t b, size_t n) {
    for (size_t r = b; r < b + n; ++r) {
      const void* row = static_cast<const char*>(sums) + r * row_bytes;
      finishAddRmsNormRow(c, r, &row, 1);
    }
  });
  return symmarSuccess;
}

}  // namespace symmar
