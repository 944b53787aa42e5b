// The fused allreduce + residual add + RMSNorm kernels (cuda/add_rms_norm.cu,
// cuda/lamport_add_rms_norm.cu) on the emulated runtime: every form, every dtype, decode and prefill-like shapes, worlds 2..8, with and without
// residual, in place, FP8 output; against a float64 reference (tolerances per dtype) and bitwise
// equal on every rank; and calls that change shape on one persistent state.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "e4m3_reference.h"
#include "emu/emu_check.h"
#include "emu/emu_comm.h"

namespace symmar {
namespace emu {
namespace {

struct NormCase {
  size_t tokens, hidden;
  symmarDataType_t dtype;
  int world;
  symmarAlgo_t form;  ///< one-shot, two-shot or lamport
  bool residual, in_place, fp8;
  bool misaligned;  ///< odd ranks' buffers one element past a 16-byte boundary (FP8: one byte)
  bool symmetric;   ///< the inputs in the symmetric heap (peers read them in place where allowed)
  int blocks = 3;   ///< the co-residency cap: room for a row spread over several blocks where rows are few
  size_t staging = 256 << 10;
};

void PrintTo(const NormCase& c, std::ostream* os) { *os << c.tokens << "x" << c.hidden; }

std::string normName(const testing::TestParamInfo<NormCase>& info) {
  const NormCase& c = info.param;
  static const char* dt[] = {"f32", "f16", "bf16"};
  return std::string(symmarAlgoName(c.form)) + "_" + dt[c.dtype] + "_" + std::to_string(c.tokens) + "x" +
         std::to_string(c.hidden) + "_w" + std::to_string(c.world) + (c.residual ? "_res" : "") +
         (c.in_place ? "_inplace" : "") + (c.fp8 ? "_fp8" : "") + (c.misaligned ? "_misaligned" : "") + (c.symmetric ? "_sym" : "") +
         (c.blocks != 3 ? "_b" + std::to_string(c.blocks) : "") +
         (c.staging != (256 << 10) ? "_s" + std::to_string(c.staging >> 10) + "k" : "");
}

double tolerance(symmarDataType_t dt) { return dt == symmarFloat32 ? 1e-5 : dt == symmarFloat16 ? 2e-3 : 1.6e-2; }
double inputAt(int rank, size_t t, size_t i) { return static_cast<double>(static_cast<int>((rank * 31 + t * 13 + i * 7) % 23) - 11) / 8.0; }
double residualAt(size_t t, size_t i) { return static_cast<double>(static_cast<int>((t * 5 + i * 3) % 19) - 9) / 4.0; }

class FusedNorm : public testing::TestWithParam<NormCase> {};

TEST_P(FusedNorm, MatchesFloat64ReferenceOnEveryRank) {
  const NormCase c = GetParam();
  EmuOptions o;
  o.world = c.world;
  o.multicast = false;
  o.staging_bytes = c.staging;
  o.bytes_per_block = 4096;
  o.blocks = c.blocks;
  EmuComm comm(o);
  const size_t n = c.tokens * c.hidden, elem = symmarTypeSize(c.dtype);
  // 16 spare bytes: room for the odd ranks' offset when misaligned.
  std::vector<std::vector<char>> in_mem(c.world, std::vector<char>(n * elem + 16)),
      res_mem(c.world, std::vector<char>(n * elem + 16)), res_out_mem(c.world, std::vector<char>(n * elem + 16)),
      norm_mem(c.world, std::vector<char>(n * elem + 16));
  std::vector<std::vector<unsigned char>> q_mem(c.world, std::vector<unsigned char>(n + 16));
  std::vector<char*> in, res, res_out, norm;
  std::vector<unsigned char*> q;
  const std::vector<char*> sym = c.symmetric ? comm.symmetricAlloc(n * elem) : std::vector<char*>();
  for (int r = 0; r < c.world; ++r) {
    const size_t shift = c.misaligned && r % 2 == 1 ? elem : 0;
    in.push_back(c.symmetric ? sym[r] : in_mem[r].data() + shift);
    res.push_back(res_mem[r].data() + shift);
    res_out.push_back(res_out_mem[r].data() + shift);
    norm.push_back(norm_mem[r].data() + shift);
    q.push_back(q_mem[r].data() + (shift ? 1 : 0));
  }
  std::vector<char> gamma(c.hidden * elem), res_ref(n * elem);
  for (size_t i = 0; i < c.hidden; ++i) storeAs(c.dtype, gamma.data(), i, 0.5 + static_cast<double>(i % 7) / 8.0);
  std::vector<AddRmsNormCall> calls;
  for (int r = 0; r < c.world; ++r) {
    for (size_t t = 0; t < c.tokens; ++t) {
      for (size_t i = 0; i < c.hidden; ++i) {
        storeAs(c.dtype, in[r], t * c.hidden + i, inputAt(r, t, i));
        storeAs(c.dtype, res[r], t * c.hidden + i, residualAt(t, i));
      }
    }
    res_ref.assign(res[0], res[0] + n * elem);
    AddRmsNormCall call{in[r], c.residual ? res[r] : nullptr, c.in_place ? in[r] : res_out[r],
                        c.in_place && c.residual ? res[r] : norm[r], gamma.data(), c.fp8 ? q[r] : nullptr,
                        0.05f, 1e-6f, c.tokens, c.hidden, c.dtype};
    calls.push_back(call);
  }
  ASSERT_TRUE(comm.runAddRmsNorm(calls, c.form));
  for (int r = 0; r < c.world; ++r) ASSERT_EQ(comm.status(r)[gpu::kStatusCode], 0) << "rank " << r;
  const char* r_out = static_cast<const char*>(calls[0].residual_out);
  const char* n_out = static_cast<const char*>(calls[0].norm_out);
  const double tol = tolerance(c.dtype);
  for (size_t t = 0; t < c.tokens; ++t) {
    double ss = 0;
    for (size_t i = 0; i < c.hidden; ++i) {
      double want = c.residual ? loadAs(c.dtype, res_ref.data(), t * c.hidden + i) : 0.0;
      for (int r = 0; r < c.world; ++r) want += inputAt(r, t, i);
      const double got = loadAs(c.dtype, r_out, t * c.hidden + i);
      ASSERT_NEAR(got, want, tol * std::fabs(want) + 1e-6) << "residual " << t << "," << i;
      ss += got * got;
    }
    const double inv = 1.0 / std::sqrt(ss / static_cast<double>(c.hidden) + 1e-6);
    for (size_t i = 0; i < c.hidden; ++i) {
      const double want = loadAs(c.dtype, r_out, t * c.hidden + i) * inv * loadAs(c.dtype, gamma.data(), i);
      const double got = loadAs(c.dtype, n_out, t * c.hidden + i);
      ASSERT_NEAR(got, want, tol * std::fabs(want) + 1e-5) << "norm " << t << "," << i;
      if (c.fp8) {
        const double v = e4m3_reference::value(q[0][t * c.hidden + i]);
        const double exact = std::fabs(want / 0.05) >= 448 ? std::copysign(448.0, want) : want / 0.05;
        ASSERT_LE(std::fabs(v - exact), std::fabs(exact) * 0.0625 + std::ldexp(1.0, -9)) << "fp8 " << t << "," << i;
      }
    }
  }
  for (int r = 1; r < c.world; ++r) {
    ASSERT_EQ(std::memcmp(static_cast<const char*>(calls[r].residual_out), r_out, n * elem), 0) << "rank " << r;
    ASSERT_EQ(std::memcmp(static_cast<const char*>(calls[r].norm_out), n_out, n * elem), 0) << "rank " << r;
    if (c.fp8) {
      ASSERT_EQ(std::memcmp(q[r], q[0], n), 0) << "rank " << r;
    }
  }
}

std::vector<NormCase> normCases() {
  std::vector<NormCase> cases;
  int k = 0;
  for (symmarAlgo_t form : {symmarAlgoOneShot, symmarAlgoTwoShot}) {
    for (symmarDataType_t dt : {symmarFloat32, symmarFloat16, symmarBfloat16}) {
      for (size_t tokens : {size_t(1), size_t(2), size_t(7), size_t(64)}) {
        for (size_t hidden : {size_t(7), size_t(128), size_t(4096)}) {
          if (tokens * hidden > 64 * 128 && tokens > 7) continue;  // keep the emulator's run short
          const bool misaligned = k % 5 == 3;
          cases.push_back({tokens, hidden, dt, 2 + k % 7, form, k % 2 == 0, k % 3 == 1, k % 4 == 2, misaligned,
                           k % 2 == 1 && !misaligned});
          ++k;
        }
      }
    }
  }
  // Rows spread over groups of blocks (few rows, a wide cap), every form: 8 parts of 1 row; 2 rows
  // of 1000 (uneven parts: 250 float32 vectors or 125 16-bit ones); and, in the staged forms, chunks
  // of 2 rows over 5 rows in groups of 3, so groups sit out chunks and rows change groups.
  for (symmarAlgo_t form : {symmarAlgoOneShot, symmarAlgoTwoShot, symmarAlgoLamport}) {
    for (symmarDataType_t dt : {symmarFloat32, symmarFloat16, symmarBfloat16}) {
      const struct {
        size_t tokens, hidden;
        int blocks;
        size_t staging;
      } spread[] = {{1, 4096, 8, 256 << 10}, {2, 1000, 16, 256 << 10}, {3, 1000, 8, 256 << 10}, {5, 4096, 16, 64 << 10}};
      for (const auto& w : spread) {
        const bool misaligned = k % 5 == 3;
        // Worlds 2-4: a grid of up to 15 blocks a rank is already many emulated threads.
        cases.push_back({w.tokens, w.hidden, dt, 2 + k % 3, form, k % 2 == 0, k % 3 == 1, k % 4 == 2, misaligned,
                         k % 2 == 1 && !misaligned, w.blocks, w.staging});
        ++k;
      }
    }
  }
  // Lamport: rows of whole vectors (hidden 128 and 4096 in every dtype; 8 and 24 in 16-bit ones),
  // up to one slot (256 KiB: 32 x 4096 bf16 fills it); more rows than the 3 blocks, so blocks take
  // several rows each.
  for (symmarDataType_t dt : {symmarFloat32, symmarFloat16, symmarBfloat16}) {
    for (size_t tokens : {size_t(1), size_t(3), size_t(7), size_t(32)}) {
      for (size_t hidden : {size_t(8), size_t(128), size_t(4096)}) {
        if (dt == symmarFloat32 && hidden == 8) continue;  // only 16-bit rows of 8 are whole vectors
        if (tokens * hidden > 64 * 128 && tokens > 7 && !(dt == symmarBfloat16 && hidden == 4096)) continue;
        const bool misaligned = k % 5 == 3;
        cases.push_back({tokens, hidden, dt, 2 + k % 7, symmarAlgoLamport, k % 2 == 0, k % 3 == 1, k % 4 == 2,
                         misaligned, k % 2 == 1 && !misaligned});
        ++k;
      }
    }
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Emulated, FusedNorm, testing::ValuesIn(normCases()), normName);

// How the host spreads a row over blocks (hand-worked for the emulator's blocks of 32 threads, 16
// for lamport): about one 16-byte vector a thread, at most 8 blocks, tokens x parts within the cap;
// never where rows are not whole vectors. Every rank computes it from the same values.
TEST(FusedNormLayout, ARowIsSpreadOverBlocksOnlyWhereTheCapLeavesRoom) {
  if (gpu::kThreads != 32) GTEST_SKIP() << "the hand-worked values are for 32-thread blocks";
  auto parts = [](size_t tokens, size_t hidden, symmarDataType_t dt, int cap) {
    AddRmsNormCall c{};
    c.tokens = tokens;
    c.hidden = hidden;
    c.dtype = dt;
    return gpu::addRmsNormRowParts(c, cap);
  };
  EXPECT_EQ(parts(1, 4096, symmarFloat32, 64), 8);    // 1024 vectors: 32 by threads, 8 at most
  EXPECT_EQ(parts(1, 96, symmarFloat32, 64), 1);      // 24 vectors: one block's threads take them all
  EXPECT_EQ(parts(1, 136, symmarBfloat16, 64), 1);    // 17 vectors
  EXPECT_EQ(parts(1, 264, symmarBfloat16, 64), 2);    // 33 vectors
  EXPECT_EQ(parts(2, 1000, symmarBfloat16, 16), 4);   // 125 vectors: 4 by threads
  EXPECT_EQ(parts(3, 1000, symmarFloat32, 8), 2);     // 8 / 3 by the cap
  EXPECT_EQ(parts(8, 4096, symmarFloat32, 8), 1);     // a block a row already fills the cap
  EXPECT_EQ(parts(64, 4096, symmarFloat32, 8), 1);
  EXPECT_EQ(parts(1, 4098, symmarFloat32, 64), 1);    // rows not whole vectors
  EXPECT_EQ(parts(1, 4096, symmarFloat32, 1), 1);
  EXPECT_EQ(parts(0, 4096, symmarFloat32, 64), 1);
  AddRmsNormCall wide{};
  wide.tokens = 1;
  wide.hidden = 4096;
  wide.dtype = symmarFloat32;
  EXPECT_EQ(gpu::addRmsNormRowParts(wide, 64, 3), 3);  // SYMMAR_FUSED_ROW_PARTS, agreed across ranks
  EXPECT_EQ(gpu::addRmsNormRowParts(wide, 64, 1), 1);

  EmuOptions o;
  o.world = 2;
  o.multicast = false;
  o.blocks = 16;
  EmuComm comm(o);
  std::vector<float> buf(3 * 1000), gamma(1000, 1.0f);
  const AddRmsNormCall call{buf.data(), nullptr, buf.data(), buf.data(), gamma.data(), nullptr, 1.0f, 1e-6f, 3, 1000,
                            symmarFloat32};
  int grid = 0;
  EXPECT_EQ(gpu::makeAddRmsNormArgs(comm.context(0), call, symmarAlgoTwoShot, &grid).row_parts, 5);
  EXPECT_EQ(grid, 15);
  EXPECT_EQ(gpu::makeAddRmsNormArgs(comm.context(0), call, symmarAlgoLamport, &grid).row_parts, 5);
  EXPECT_EQ(grid, 15);
  // Lamport blocks have half the threads: 250 vectors make 16 parts by threads, 8 at most.
  EXPECT_EQ(gpu::addRmsNormRowParts(wide, 64, 8, gpu::kLamportThreads), 8);
  AddRmsNormCall narrow = wide;
  narrow.hidden = 64;  // 16 vectors: one lamport block's threads take them all
  EXPECT_EQ(gpu::addRmsNormRowParts(narrow, 64, 8, gpu::kLamportThreads), 1);
}

// What the host decides a form with, for the GPU backend: the kernels' own row layouts. A row of
// 8191 float32 (32764 bytes) fits a 32768-byte half in either form (the two-shot pads it to 32768);
// a row of 8193 in neither; an odd row with fp8 takes 16 bytes in the two-shot, no more (the sums
// are what it publishes; every rank writes its own fp8 output).
TEST(FusedNormLayout, RowBytesAreTheKernelsLayouts) {
  gpu::LaunchContext ctx;
  ctx.layout.staging_bytes = 64 << 10;
  AddRmsNormCall c{nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, 1.0f, 0.0f, 4, 8191, symmarFloat32};
  EXPECT_EQ(gpu::addRmsNormRowBytes(c, false), 32764u);
  EXPECT_EQ(gpu::addRmsNormRowBytes(c, true), 32768u);
  EXPECT_EQ(gpu::addRmsNormRowsPerChunk(ctx, c, false), 1u);
  EXPECT_EQ(gpu::addRmsNormRowsPerChunk(ctx, c, true), 1u);
  c.hidden = 8193;
  EXPECT_EQ(gpu::addRmsNormRowsPerChunk(ctx, c, false), 0u);
  EXPECT_EQ(gpu::addRmsNormRowsPerChunk(ctx, c, true), 0u);
  unsigned char q = 0;
  AddRmsNormCall odd{nullptr, nullptr, nullptr, nullptr, nullptr, &q, 1.0f, 0.0f, 4, 7, symmarBfloat16};
  EXPECT_EQ(gpu::addRmsNormRowBytes(odd, false), 14u);
  EXPECT_EQ(gpu::addRmsNormRowBytes(odd, true), 16u);
  EXPECT_EQ(gpu::addRmsNormRowBytes(odd, true), sched::fusedRowBytes(7, 2, true));
  AddRmsNormCall empty = c;
  empty.hidden = 0;
  EXPECT_EQ(gpu::addRmsNormRowsPerChunk(ctx, empty, true), 0u) << "no division by an empty row";
}

// Where peers read a fused call's input in place (gpu::fusedInputOffset): in the symmetric heap,
// rows of whole vectors, and no output over it; the two-shot also takes an output that is the input
// itself (its owner reads a row before the row's block writes it), the one-shot does not (its peers
// read every row until they finish). Everything else is staged.
TEST(FusedNormLayout, PeersReadTheInputInPlaceOnlyWhereNoOutputOverlapsIt) {
  EmuOptions o;
  o.world = 2;
  o.multicast = false;
  EmuComm comm(o);
  const gpu::LaunchContext ctx = comm.context(0);
  const size_t tokens = 4, hidden = 64, bytes = tokens * hidden * 4;
  char* sym = comm.symmetricAlloc(3 * bytes)[0];
  std::vector<float> priv(tokens * hidden), out(tokens * hidden), norm(tokens * hidden);
  std::vector<unsigned char> q(tokens * hidden);
  AddRmsNormCall c{sym, nullptr, out.data(), norm.data(), nullptr, q.data(), 1.0f, 0.0f, tokens, hidden, symmarFloat32};
  const uint64_t heap_off = static_cast<uint64_t>(sym - comm.base(0));  // its offset in rank 0's allocation
  EXPECT_EQ(gpu::fusedInputOffset(ctx, c, false), heap_off);
  EXPECT_EQ(gpu::fusedInputOffset(ctx, c, true), heap_off);
  AddRmsNormCall odd = c;
  odd.hidden = 63;
  EXPECT_EQ(gpu::fusedInputOffset(ctx, odd, true), gpu::kStagedInput) << "rows not of whole vectors";
  AddRmsNormCall own = c;
  own.input = priv.data();
  EXPECT_EQ(gpu::fusedInputOffset(ctx, own, false), gpu::kStagedInput) << "not in the heap";
  AddRmsNormCall same = c;
  same.residual_out = sym;
  EXPECT_EQ(gpu::fusedInputOffset(ctx, same, false), gpu::kStagedInput) << "one-shot: output over the input";
  EXPECT_EQ(gpu::fusedInputOffset(ctx, same, true), heap_off) << "two-shot: the output is the input";
  AddRmsNormCall shifted = c;
  shifted.norm_out = sym + 16 * 4;  // a quarter row past the input: rows overlap rows of other blocks
  EXPECT_EQ(gpu::fusedInputOffset(ctx, shifted, true), gpu::kStagedInput);
  AddRmsNormCall after = c;
  after.norm_out = sym + bytes;  // right after it: apart
  EXPECT_EQ(gpu::fusedInputOffset(ctx, after, false), heap_off);
  AddRmsNormCall fp8_over = c;
  fp8_over.fp8_out = reinterpret_cast<unsigned char*>(sym);
  EXPECT_EQ(gpu::fusedInputOffset(ctx, fp8_over, true), gpu::kStagedInput) << "an fp8 row is not an input row";
}

// The add and norm alone (the unfused call, after an allreduce into `sums`), every dtype, hidden
// of whole vectors and not: against a float64 reference, and the same bits whether the sums sit
// 16-byte aligned or an element past it (ranks' buffers differ, and every rank must get the same
// bits), written over residual_out (in place) or over norm_out (residual_out is residual_in).
TEST(FusedNormRows, AddAndNormAfterTheAllreduceMatchTheReferenceAtAnyAlignment) {
  for (symmarDataType_t dt : {symmarFloat32, symmarFloat16, symmarBfloat16}) {
    for (size_t hidden : {size_t(7), size_t(256)}) {
      // 19 rows: under the cap of 2 blocks below, a block takes 10, more than one batch of rows.
      const size_t tokens = 19, n = tokens * hidden, elem = symmarTypeSize(dt);
      std::vector<char> gamma(hidden * elem), res(n * elem);
      for (size_t i = 0; i < hidden; ++i) storeAs(dt, gamma.data(), i, 0.5 + static_cast<double>(i % 7) / 8.0);
      for (size_t i = 0; i < n; ++i) storeAs(dt, res.data(), i, residualAt(i / hidden, i % hidden));
      std::vector<std::vector<char>> outs;
      for (int layout = 0; layout < 3; ++layout) {  // sums aligned in residual_out, misaligned, in norm_out
        const size_t shift = layout == 1 ? elem : 0;
        std::vector<char> res_mem(n * elem + 16), out_mem(n * elem + 16), norm_mem(n * elem + 16);
        char* res_in = res_mem.data() + shift;
        std::memcpy(res_in, res.data(), n * elem);
        char* res_out = layout == 2 ? res_in : out_mem.data() + shift;
        char* norm = norm_mem.data() + shift;
        char* sums = layout == 2 ? norm : res_out;
        for (size_t i = 0; i < n; ++i) storeAs(dt, sums, i, inputAt(0, i / hidden, i % hidden) + inputAt(1, i / hidden, i % hidden));
        const AddRmsNormCall call{nullptr, res_in, res_out, norm, gamma.data(), nullptr, 1.0f, 1e-6f, tokens, hidden, dt};
        // Layout 1 runs under a cap of 2 blocks (ranks sharing a GPU): blocks take every second row.
        int grid = 0;
        const gpu::KernelArgs args =
            gpu::makeAddRmsNormRowsArgs(call, sums, layout == 1 ? 2 : gpu::kAddRmsNormRowsBlocks, &grid);
        ASSERT_EQ(grid, layout == 1 ? 2 : static_cast<int>(tokens));
        runConcurrently({Launch{gpu::addRmsNormRowsKernel(dt), grid, args}});
        const double tol = tolerance(dt);
        for (size_t t = 0; t < tokens; ++t) {
          double ss = 0;
          for (size_t i = 0; i < hidden; ++i) {
            const size_t k = t * hidden + i;
            const double want = loadAs(dt, res.data(), k) + inputAt(0, t, i) + inputAt(1, t, i);
            const double got = loadAs(dt, res_out, k);
            ASSERT_NEAR(got, want, tol * std::fabs(want) + 1e-6) << "layout " << layout << " residual " << t << "," << i;
            ss += got * got;
          }
          const double inv = 1.0 / std::sqrt(ss / static_cast<double>(hidden) + 1e-6);
          for (size_t i = 0; i < hidden; ++i) {
            const size_t k = t * hidden + i;
            const double want = loadAs(dt, res_out, k) * inv * loadAs(dt, gamma.data(), i);
            ASSERT_NEAR(loadAs(dt, norm, k), want, tol * std::fabs(want) + 1e-5) << "layout " << layout << " norm " << t;
          }
        }
        std::vector<char> bits(res_out, res_out + n * elem);
        bits.insert(bits.end(), norm, norm + n * elem);
        outs.push_back(bits);
      }
      EXPECT_EQ(outs[1], outs[0]) << "dtype " << dt << " hidden " << hidden << ": misaligned sums, other bits";
      EXPECT_EQ(outs[2], outs[0]) << "dtype " << dt << " hidden " << hidden << ": sums in norm_out, other bits";
    }
  }
}

// Rows change hands between chunks of one call: a two-shot call of 12 rows whose chunks hold 8
// (slices 0-3 and 4-7, then 0-1 and 2-3 of the last 4) on 4 blocks. Block 2 of rank 0 is held
// before it finishes row 2 of the first chunk, until block 0 of rank 1 has staged the second chunk
// and entered its first barrier. Per-block flags order a staging row only if the same block index
// stages it in every chunk: if block 0 stages row 2 of the second chunk, rank 0 reads token 10's
// inputs for token 2.
std::atomic<const char*> g_held_flag{nullptr};     ///< rank 0's flag from rank 1, block 2
std::atomic<const uint32_t*> g_progress{nullptr};  ///< rank 0's flag from rank 1, block 0
std::atomic<bool> g_held_once{false};

void holdUntilPeerStagedNextChunk(const void* address) {
  if (address != g_held_flag.load() || g_held_once.exchange(true)) return;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  // Epochs 1 and 2 are the first chunk's barriers, 3 the second chunk's first.
  while (std::atomic_ref<const uint32_t>(*g_progress.load()).load(std::memory_order_acquire) < 3 &&
         std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

TEST(FusedNormChunks, ABlockHeldInOneChunkSeesNoRowOfTheNext) {
  EmuOptions o;
  o.world = 2;
  o.multicast = false;
  o.blocks = 4;
  o.staging_bytes = 8 << 10;  // halves of 4 KiB: 8 rows of 512 bytes
  EmuComm comm(o);
  const size_t tokens = 12, hidden = 128, n = tokens * hidden;
  std::vector<std::vector<float>> in(2, std::vector<float>(n)), res_out = in, norm = in;
  const std::vector<float> gamma(hidden, 1.0f);
  std::vector<AddRmsNormCall> calls;
  for (int r = 0; r < 2; ++r) {
    for (size_t t = 0; t < tokens; ++t) {
      for (size_t i = 0; i < hidden; ++i) in[r][t * hidden + i] = static_cast<float>(inputAt(r, t, i));
    }
    calls.push_back(AddRmsNormCall{in[r].data(), nullptr, res_out[r].data(), norm[r].data(), gamma.data(), nullptr,
                                   1.0f, 1e-6f, tokens, hidden, symmarFloat32});
  }
  ASSERT_EQ(gpu::addRmsNormRowsPerChunk(comm.context(0), calls[0], true), 8u);
  const char* pad0 = comm.base(0) + comm.context(0).layout.pad_off;
  g_held_flag = pad0 + gpu::padFlagOffset(1, 2, sched::kSlotStart);
  g_progress = reinterpret_cast<const uint32_t*>(pad0 + gpu::padFlagOffset(1, 0, sched::kSlotStart));
  g_held_once = false;
  setAccessHook(holdUntilPeerStagedNextChunk);
  const bool ran = comm.runAddRmsNorm(calls, symmarAlgoTwoShot);
  setAccessHook(nullptr);
  ASSERT_TRUE(ran);
  ASSERT_TRUE(g_held_once.load()) << "block 2 of rank 0 never waited for rank 1";
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(comm.status(r)[gpu::kStatusCode], 0) << "rank " << r;
    for (size_t t = 0; t < tokens; ++t) {
      for (size_t i = 0; i < hidden; ++i) {
        const double want = inputAt(0, t, i) + inputAt(1, t, i);  // sums of eighths: exact in float32
        ASSERT_EQ(res_out[r][t * hidden + i], want) << "rank " << r << " token " << t << " element " << i;
      }
    }
  }
}

}  // namespace
}  // namespace emu
}  // namespace symmar
