#include "mp/mp_util.h"

#include <dirent.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "common/reference.h"

namespace mp {

std::vector<int> runForked(int nranks, const std::function<int(int)>& body, int timeout_s) {
  fflush(stdout);
  fflush(stderr);
  std::vector<pid_t> pids(nranks);
  for (int r = 0; r < nranks; ++r) {
    pid_t pid = fork();
    if (pid == 0) {
      int rc = 1;
      try {
        rc = body(r);
      } catch (...) {
        fprintf(stderr, "rank %d: exception\n", r);
      }
      fflush(stdout);
      fflush(stderr);
      _exit(rc > 255 ? 255 : rc);
    }
    pids[r] = pid;
  }
  std::vector<int> status(nranks, 255);
  std::vector<bool> done(nranks, false);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  for (int left = nranks; left > 0;) {
    for (int r = 0; r < nranks; ++r) {
      if (done[r]) continue;
      int st = 0;
      if (waitpid(pids[r], &st, WNOHANG) == pids[r]) {
        done[r] = true;
        --left;
        status[r] = WIFEXITED(st) ? WEXITSTATUS(st) : -WTERMSIG(st);
      }
    }
    if (std::chrono::steady_clock::now() > deadline) {
      for (int r = 0; r < nranks; ++r) {
        if (!done[r]) kill(pids[r], SIGKILL);
      }
      for (int r = 0; r < nranks; ++r) {
        if (!done[r]) waitpid(pids[r], nullptr, 0);
      }
      fprintf(stderr, "runForked: ranks still running after %d s were killed\n", timeout_s);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return status;
}

std::vector<int> runThreads(int nranks, const std::function<int(int)>& body) {
  std::vector<int> results(nranks, 1);
  std::vector<std::thread> threads;
  for (int r = 0; r < nranks; ++r) threads.emplace_back([&, r] { results[r] = body(r); });
  for (auto& t : threads) t.join();
  return results;
}

SharedWords::SharedWords(size_t count) : count_(count) {
  void* p = mmap(nullptr, count * sizeof(uint64_t), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  words_ = static_cast<uint64_t*>(p == MAP_FAILED ? nullptr : p);
}
SharedWords::~SharedWords() {
  if (words_) munmap(words_, count_ * sizeof(uint64_t));
}

std::string describe(const Case& c) {
  static const char* dt[] = {"f32", "f16", "bf16", "i32", "f64"};
  static const char* op[] = {"sum", "max", "min"};
  char buf[160];
  snprintf(buf, sizeof(buf), "%s %s count=%zu %s %s %s", dt[c.dtype], op[c.op], c.count,
           c.in_place ? "in-place" : "out-of-place", symmarAlgoName(c.algo), c.random_data ? "random" : "exact");
  return buf;
}

namespace {

double inputValue(int rank, size_t i, bool random_data) {
  return random_data ? testref::fractionalInput(rank, i) : testref::smallIntInput(rank, i);
}

}  // namespace

int runCase(symmarComm_t comm, int rank, int world, const Case& c, uint64_t* digest) {
  const size_t elem = symmarTypeSize(c.dtype);
  std::vector<uint64_t> send_store((c.count * elem + 7) / 8 + 1), recv_store((c.count * elem + 7) / 8 + 1);
  void* send = send_store.data();
  void* recv = c.in_place ? send : recv_store.data();
  for (size_t i = 0; i < c.count; ++i) testref::storeElement(send, c.dtype, i, inputValue(rank, i, c.random_data));
  symmarResult_t res = symmarAllReduceAlgo(send, recv, c.count, c.dtype, c.op, c.algo, comm, nullptr);
  if (res != symmarSuccess) {
    fprintf(stderr, "rank %d: %s: %s (%s)\n", rank, describe(c).c_str(), symmarGetErrorString(res),
            symmarGetLastError(comm));
    return 1;
  }
  // Small integers reduce exactly in every dtype, and so does max/min of anything: those compare
  // exactly. Only sums of fractional data round.
  const bool tolerant = c.random_data && c.op == symmarSum;
  int errors = 0;
  for (size_t i = 0; i < c.count; ++i) {
    // Reference from the inputs as each rank stored them (rounded to the dtype), in float64.
    const double ref =
        testref::reduceRanks(c.dtype, c.op, world, [&](int r) { return inputValue(r, i, c.random_data); });
    const double got = testref::loadElement(recv, c.dtype, i);
    const double tol = tolerant ? testref::sumTolerance(c.dtype, ref, world) : 0.0;
    if (!testref::within(got, ref, tol)) {
      if (errors < 3) {
        fprintf(stderr, "rank %d: %s: element %zu = %.9g, expected %.9g\n", rank, describe(c).c_str(), i, got, ref);
      }
      ++errors;
    }
  }
  *digest = testref::digest(recv, c.count * elem);
  return errors;
}

std::vector<Case> caseMatrix(size_t staging_bytes, bool full) {
  std::vector<Case> cases;
  const symmarDataType_t dtypes[] = {symmarFloat32, symmarFloat16, symmarBfloat16, symmarInt32, symmarFloat64};
  const symmarAlgo_t algos[] = {symmarAlgoOneShot, symmarAlgoTwoShot, symmarAlgoAuto};
  for (symmarDataType_t dt : dtypes) {
    const size_t elem = symmarTypeSize(dt);
    std::vector<size_t> counts = {0, 1, 2, 3, 7, 1000, 65537};
    std::vector<size_t> big = {(size_t(1) << 20) + 3, 3 * staging_bytes / elem + 5};
    for (int op = 0; op < symmarNumOps; ++op) {
      for (symmarAlgo_t algo : algos) {
        for (int in_place = 0; in_place < 2; ++in_place) {
          for (size_t n : counts) cases.push_back({dt, static_cast<symmarRedOp_t>(op), n, in_place == 1, algo, false});
          // Large counts: every combination in the full matrix, sum only otherwise (to bound CI time).
          if (full || op == symmarSum) {
            for (size_t n : big) cases.push_back({dt, static_cast<symmarRedOp_t>(op), n, in_place == 1, algo, false});
          }
        }
      }
    }
    if (dt != symmarInt32) {
      for (symmarAlgo_t algo : algos) cases.push_back({dt, symmarSum, 70001, false, algo, true});
    }
  }
  return cases;
}

int countOpenFds() {
  int n = 0;
  if (DIR* d = opendir("/proc/self/fd")) {
    while (dirent* e = readdir(d)) n += e->d_name[0] != '.';
    closedir(d);
  }
  return n - 1;  // the directory stream itself
}

int countHeapMappings() {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  int n = 0;
  while (std::getline(maps, line)) n += line.find("symmar-heap") != std::string::npos;
  return n;
}

std::string describe(const GatherCase& c) {
  static const char* const kDtypes[] = {"float32", "float16", "bfloat16", "int32", "float64"};
  static const char* const kOps[] = {"sum", "max", "min"};
  char buf[160];
  static const char* const kSymmetric[] = {"", ", symmetric buffers", ", symmetric buffers on even ranks"};
  snprintf(buf, sizeof(buf), "%s of %zu x %s%s%s%s, algo %s%s", c.scatter ? "reduce-scatter" : "all-gather", c.count,
           kDtypes[c.dtype], c.scatter ? " " : "", c.scatter ? kOps[c.op] : "", c.in_place ? " in place" : "",
           symmarAlgoName(c.algo), kSymmetric[c.symmetric]);
  return buf;
}

int runGatherCase(symmarComm_t comm, int rank, int world, const GatherCase& c, int call) {
  const size_t elem = testref::elementSize(c.dtype);
  const size_t n = c.count, whole = n * static_cast<size_t>(world);
  // The whole buffer (nranks blocks) and the block: separate, or the block at this rank's place.
  std::vector<unsigned char> big(whole * elem + 1), small(c.in_place ? 1 : n * elem + 1);
  unsigned char* block = c.in_place ? big.data() + static_cast<size_t>(rank) * n * elem : small.data();
  std::vector<double> want(c.scatter ? n : whole);
  if (c.scatter) {
    testref::fillSmallInts(c.dtype, big.data(), whole, rank, call);
    for (size_t j = 0; j < n; ++j) {
      want[j] = testref::reduceRanks(c.dtype, c.op, world,
                                     [&](int r) { return testref::smallIntInput(r, rank * n + j, call); });
    }
  } else {
    memset(big.data(), 0x7f, big.size());  // garbage where the blocks land
    testref::fillSmallInts(c.dtype, block, n, rank, call);
    for (size_t i = 0; i < whole; ++i) {
      want[i] = testref::roundTo(c.dtype, testref::smallIntInput(static_cast<int>(i / n), i % n, call));
    }
  }
  unsigned char* whole_buf = big.data();
  void* heap = nullptr;  // collective: every rank allocates, the chosen ones use it
  if (c.symmetric && n > 0 && symmarMemAlloc(comm, (whole + n) * elem, &heap) != symmarSuccess) {
    fprintf(stderr, "rank %d: symmarMemAlloc: %s\n", rank, symmarGetLastError(comm));
    return 1;
  }
  if (heap && (c.symmetric == 1 || rank % 2 == 0)) {  // the same contents, in the symmetric heap
    whole_buf = static_cast<unsigned char*>(heap);
    memcpy(whole_buf, big.data(), whole * elem);
    unsigned char* heap_block = c.in_place ? whole_buf + static_cast<size_t>(rank) * n * elem : whole_buf + whole * elem;
    if (!c.in_place) memcpy(heap_block, block, n * elem);
    block = heap_block;
  }
  const void* send = c.scatter ? static_cast<const void*>(whole_buf) : block;
  void* recv = c.scatter ? static_cast<void*>(block) : whole_buf;
  if (n == 0) send = recv = nullptr;  // count 0 may pass NULL
  const symmarResult_t res = c.scatter
                                 ? symmarReduceScatterAlgo(send, recv, n, c.dtype, c.op, c.algo, comm, nullptr)
                                 : symmarAllGatherAlgo(send, recv, n, c.dtype, c.algo, comm, nullptr);
  if (heap && whole_buf == heap) {  // the checks below read the caller buffers
    memcpy(big.data(), whole_buf, whole * elem);
    if (!c.in_place) memcpy(small.data(), whole_buf + whole * elem, n * elem);
    block = c.in_place ? big.data() + static_cast<size_t>(rank) * n * elem : small.data();
  }
  if (heap && symmarMemFree(comm, heap) != symmarSuccess) {
    fprintf(stderr, "rank %d: symmarMemFree: %s\n", rank, symmarGetLastError(comm));
    return 1;
  }
  if (res != symmarSuccess) {
    fprintf(stderr, "rank %d: %s failed: %s\n", rank, describe(c).c_str(), symmarGetLastError(comm));
    return 1;
  }
  if (n == 0) return 0;
  const std::string bad = testref::checkResult(c.dtype, c.scatter ? block : big.data(), want.data(), want.size(), world,
                                               testref::Match::kExact);
  if (bad.empty()) return 0;
  fprintf(stderr, "rank %d: %s: %s\n", rank, describe(c).c_str(), bad.c_str());
  return 1;
}

}  // namespace mp
