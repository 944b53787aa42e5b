/*
 * Minimal use of the symmar C API (C11): the parent makes a unique id, forks N ranks (argv[1],
 * default 2), each rank joins a host-backend comm, allreduces float32 and checks the result, and
 * rank 0 prints one summary line per rank. Exits nonzero on any failure.
 *
 *   ./symmar_c_api_example [nranks] [count]
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <symmar/symmar.h>

#define CHECK(call)                                                                               \
  do {                                                                                            \
    symmarResult_t res_ = (call);                                                                 \
    if (res_ != symmarSuccess) {                                                                  \
      fprintf(stderr, "rank %d: %s failed: %s: %s\n", rank, #call, symmarGetErrorString(res_),     \
              symmarGetLastError(comm));                                                          \
      goto done;                                                                                  \
    }                                                                                             \
  } while (0)

/* Rank r's input: small integers, so every sum is exact in float32 whatever the order. */
static float input(int rank, size_t i) { return (float)((int)((i * 7 + (size_t)rank * 13) % 17) - 8); }

static int runRank(int rank, int nranks, size_t count, symmarUniqueId id) {
  symmarComm_t comm = NULL;
  float* x = malloc(count * sizeof(float));
  float* y = malloc(count * sizeof(float));
  int stats[3] = {0, 0, 0}; /* errors, algo, done */
  int* all = calloc((size_t)nranks * 3, sizeof(int));
  int ok = 0;
  if (!x || !y || !all) {
    fprintf(stderr, "rank %d: out of memory\n", rank);
    goto done;
  }

  symmarConfig_t cfg = SYMMAR_CONFIG_INIT;
  cfg.device = SYMMAR_DEVICE_CPU; /* host backend: buffers are host memory, stream is NULL */
  cfg.timeout_ms = 20000;         /* a rank that never arrives fails the others in 20 s */
  CHECK(symmarCommInitRank(&comm, nranks, id, rank, &cfg));

  for (size_t i = 0; i < count; ++i) x[i] = input(rank, i);
  CHECK(symmarAllReduce(x, y, count, symmarFloat32, symmarSum, comm, NULL)); /* out of place */
  CHECK(symmarAllReduce(x, x, count, symmarFloat32, symmarSum, comm, NULL)); /* in place */
  for (size_t i = 0; i < count; ++i) {
    float expect = 0.0f;
    for (int r = 0; r < nranks; ++r) expect += input(r, i);
    if (y[i] != expect || x[i] != expect) ++stats[0];
  }
  symmarAlgo_t algo = symmarAlgoAuto;
  CHECK(symmarCommPlan(comm, count, symmarFloat32, symmarSum, &algo));
  stats[1] = (int)algo;
  stats[2] = 1;

  /* Gather every rank's stats on every rank: each writes its own slot, a sum collects them. */
  memcpy(&all[rank * 3], stats, sizeof(stats));
  CHECK(symmarAllReduce(all, all, (size_t)nranks * 3, symmarInt32, symmarSum, comm, NULL));
  ok = stats[0] == 0;
  if (rank == 0) {
    for (int r = 0; r < nranks; ++r) {
      const int* s = &all[r * 3];
      printf("rank %d/%d: %s, %zu float32 summed by %s, %d mismatches\n", r, nranks,
             s[2] && s[0] == 0 ? "ok" : "FAILED", count, symmarAlgoName((symmarAlgo_t)s[1]), s[0]);
      if (!s[2] || s[0] != 0) ok = 0;
    }
    fflush(stdout);
  }

done:
  if (comm) symmarCommDestroy(comm);
  free(x);
  free(y);
  free(all);
  return ok ? 0 : 1;
}

int main(int argc, char** argv) {
  int nranks = argc > 1 ? atoi(argv[1]) : 2;
  long count_arg = argc > 2 ? atol(argv[2]) : 100003;
  if (nranks < 1 || nranks > 64 || count_arg < 1) {
    fprintf(stderr, "usage: %s [nranks 1..64] [count >= 1]\n", argv[0]);
    return 2;
  }
  size_t count = (size_t)count_arg;

  int version = 0;
  symmarGetVersion(&version);
  symmarUniqueId id; /* made once, before forking: every rank inherits it */
  symmarResult_t res = symmarGetUniqueId(&id);
  if (res != symmarSuccess) {
    fprintf(stderr, "symmarGetUniqueId: %s: %s\n", symmarGetErrorString(res), symmarGetLastError(NULL));
    return 1;
  }
  printf("symmar %d.%d.%d: %d ranks\n", version / 10000, version / 100 % 100, version % 100, nranks);
  fflush(stdout);

  pid_t* pids = calloc((size_t)nranks, sizeof(pid_t));
  if (!pids) return 1;
  int failed = 0;
  for (int r = 0; r < nranks; ++r) {
    pids[r] = fork();
    if (pids[r] == 0) _exit(runRank(r, nranks, count, id));
    if (pids[r] < 0) {
      perror("fork");
      failed = 1;
      break;
    }
  }
  for (int r = 0; r < nranks; ++r) {
    int status = 0;
    if (pids[r] <= 0) continue;
    if (waitpid(pids[r], &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      fprintf(stderr, "rank %d failed (status 0x%x)\n", r, status);
      failed = 1;
    }
  }
  free(pids);
  printf("%s\n", failed ? "FAILED" : "PASSED");
  return failed;
}
