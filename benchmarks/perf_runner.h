// One rank's side of a symmar_perf sweep: buffers, timing, checking.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "core/call.h"
#include "perf_group.h"
#include "symmar/symmar.h"

namespace perf {

struct Options {
  size_t min_bytes = 8;
  size_t max_bytes = 64 << 20;
  double factor = 2;
  int iters = 20;
  int warmup = 5;
  int block = 10;  // --block: calls of one variant in a row (perf_schedule.h)
  bool check = true;
  symmarDataType_t dtype = symmarFloat32;
  std::vector<symmarDataType_t> dtypes;        // -d a,b: several, interleaved like the algorithms (dtype: a)
  symmarRedOp_t op = symmarSum;
  symmar::Collective coll = symmar::Collective::kAllReduce;  // -C
  bool graph = false;                          // capture each call in a CUDA graph (GPU)
  std::vector<symmarAlgo_t> algos = {symmarAlgoAuto};
  bool all_algos = false;                      // "-A all": every algorithm this comm can serve
  std::string device = "auto";                 // cpu | gpu | auto
  int local_world = 0;                         // ranks in this process (threads)
  std::string json;                            // -J file
  bool symmetric = false;                      // buffers from symmarMemAlloc (zero-copy inputs)
  size_t offset = 0;                           // host buffers start this many bytes past a page
  bool hot = false;  // --hot: host send buffers rewritten (untimed) before every call, as a producer leaves them
  bool in_place = false;  // --in-place: host allreduce into its send buffer, rewritten before every call
  bool huge_pages = false;  // --huge-pages: host buffers in transparent huge pages where the kernel gives them
  bool plant_wrong = false;                    // test switch: corrupt one result before checking
  std::string table_file;  // the comm's table file (symmarConfig_t.table_file; "": the environment's or built-in)
};

struct Result {
  symmarAlgo_t algo;
  symmarDataType_t dtype;
  size_t bytes;  // the whole buffer: an allreduce's, the larger of a reduce-scatter's or all-gather's
  size_t count;  // elements of bytes, as nccl-tests counts them
  double time_us;  // median over iterations, max over ranks
  double min_us;   // the fastest and the slowest timed call, each the max over ranks: the spread,
  double max_us;   // so that a bimodal size shows beside its median
  double algbw_gbs;
  double busbw_gbs;
  long wrong;
  symmarAlgo_t planned;  // what auto ran for this size
};

/// Runs the sweep on this rank. Collective over group; returns the same results on every rank.
/// gpu_device >= 0 runs on that CUDA device with the comm's stream semantics.
bool runSweep(symmarComm_t comm, Group& group, const Options& opt, int gpu_device, std::vector<Result>* results,
              std::string* error);

/// nccl-tests' bus bandwidth factor: 2(n-1)/n for allreduce, (n-1)/n for reduce-scatter and all-gather.
inline double busFactor(symmar::Collective coll, int n) {
  if (n <= 1) return 1.0;
  return (coll == symmar::Collective::kAllReduce ? 2.0 : 1.0) * (n - 1) / n;
}

}  // namespace perf
