/**
 * @file symmar.h
 * @brief symmar C ABI: one intra-node allreduce that picks the fastest correct algorithm.
 *
 * Every function returns a ::symmarResult_t (unless stated), never throws, never exits and never
 * prints except through the logger (SYMMAR_DEBUG). Names and signatures are stable.
 *
 * Sections: errors and version; element types, operators, algorithms and links; creating and
 * destroying a comm; queries; symmetric memory; collectives; the fused allreduce + add + RMSNorm;
 * fallbacks and engines; groups.
 */
#ifndef SYMMAR_SYMMAR_H_
#define SYMMAR_SYMMAR_H_

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Errors and version ---- */

#define SYMMAR_MAJOR 0
#define SYMMAR_MINOR 1
#define SYMMAR_PATCH 0
/** Version as major*10000 + minor*100 + patch. */
#define SYMMAR_VERSION_CODE (SYMMAR_MAJOR * 10000 + SYMMAR_MINOR * 100 + SYMMAR_PATCH)

/** Result codes. */
typedef enum {
  symmarSuccess = 0,
  symmarInvalidArgument = 1, /**< null pointer, bad count/dtype/op/rank, misuse of a buffer */
  symmarInvalidUsage = 2,    /**< wrong call order or state, e.g. call on a failed comm */
  symmarUnsupported = 3,     /**< no algorithm (fallback included) can serve the request */
  symmarSystemError = 4,     /**< an OS call failed: socket, memfd, mmap, ... */
  symmarCudaError = 5,       /**< CUDA runtime or driver failure, or no usable GPU for a GPU comm */
  symmarNcclError = 6,       /**< the NCCL fallback failed */
  symmarTimeout = 7,         /**< a peer did not arrive within the comm's timeout */
  symmarPeerFailure = 8,     /**< a peer disconnected or aborted */
  symmarOutOfMemory = 9,
  symmarInternalError = 10,
  symmarNumResults
} symmarResult_t;

/** Opaque communicator handle. */
typedef struct symmarComm* symmarComm_t;

/** Static name of a result code ("symmarTimeout", ...); "unknown result" for out-of-range codes. */
const char* symmarGetErrorString(symmarResult_t result);
/** Detail of this comm's last failure ("" if none). NULL comm: the calling thread's last failure. */
const char* symmarGetLastError(symmarComm_t comm);
/**
 * Records text as the calling thread's last error and returns code. For code that runs inside a
 * symmar call on the library's behalf (a fallback allreduce, an engine allgather, libsymmar_mpi):
 * the text then reaches symmarGetLastError of the comm (or of NULL) like the library's own.
 */
symmarResult_t symmarReportError(symmarResult_t code, const char* text);
/** Reads the comm's asynchronous status without synchronising; symmarSuccess in *async_error if none.
 * A failure it reports also sets symmarGetLastError(comm) to its cause. */
symmarResult_t symmarCommGetAsyncError(symmarComm_t comm, symmarResult_t* async_error);
/** Writes SYMMAR_VERSION_CODE of the loaded library. */
symmarResult_t symmarGetVersion(int* version);

/* ---- Element types, operators, algorithms and links ---- */

/** Element types. fp16 and bf16 are reduced with fp32 accumulation. */
typedef enum {
  symmarFloat32 = 0,
  symmarFloat16 = 1,
  symmarBfloat16 = 2,
  symmarInt32 = 3,
  symmarFloat64 = 4,
  symmarNumTypes
} symmarDataType_t;

/** Reduction operators. */
typedef enum { symmarSum = 0, symmarMax = 1, symmarMin = 2, symmarNumOps } symmarRedOp_t;

/** Algorithms; symmarAlgoAuto lets the planner choose from the tables. */
typedef enum {
  symmarAlgoAuto = 0,
  symmarAlgoOneShot = 1,  /**< every rank reads all peers' buffers and reduces */
  symmarAlgoTwoShot = 2,  /**< reduce-scatter by loads, then all-gather */
  symmarAlgoMultimem = 3, /**< NVLink SHARP: multimem.ld_reduce + multimem.st (NVSwitch, SM90+) */
  symmarAlgoNccl = 4,     /**< ncclAllReduce (GPU fallback) */
  symmarAlgoMpi = 5,      /**< MPI_Allreduce (host fallback, needs libsymmar_mpi) */
  /** One-shot with the LL protocol (data carries its own arrival flag), for the smallest messages
      (at most SYMMAR_LAMPORT_MAX_BYTES): each rank pushes its input into every peer's buffer and
      readers wait on the data itself, with no barrier, -0.0 in every 16-bit half meaning "not
      written yet". f16/bf16 inputs' -0.0 is sent as +0.0 and the one f32 value with that bit
      pattern (the denormal -4.6e-41) as -0.0, so a result can differ from one-shot only in the
      sign of a zero sum or by that denormal. The host backend's reduce-scatter and all-gather
      forms (one host; a block of at most SYMMAR_LAMPORT_MAX_BYTES per rank, any dtype) send
      their data raw behind a completion mark: every bit arrives as it was. A lamport call that
      does not match its peers' fails the comm, not just the call. */
  symmarAlgoLamport = 6,
  symmarNumAlgos
} symmarAlgo_t;

/** Largest message (bytes per rank) symmarAlgoLamport serves: the size of its buffers. */
#define SYMMAR_LAMPORT_MAX_BYTES (256u * 1024u)

/** How the ranks' memories are connected. */
typedef enum {
  symmarLinkUnknown = 0,
  symmarLinkNvSwitch = 1,
  symmarLinkNvLink = 2,
  symmarLinkPcie = 3,          /**< GPUs with peer access over PCIe */
  symmarLinkHostMemory = 4,    /**< the host backend: CPU ranks sharing memory */
  /** GPUs on one host without working peer access (unsupported, broken per the probe, or
      SYMMAR_P2P=off): the kernels stage through pinned host memory shared by the ranks. */
  symmarLinkPcieNoP2P = 5,
  symmarNumLinks               /**< the number of links, not a link: new links go before it */
} symmarLink_t;

/* ---- Creating and destroying a comm ---- */

#define SYMMAR_DEVICE_CPU (-1)  /**< host backend: buffers are host memory, stream must be NULL */
#define SYMMAR_DEVICE_AUTO (-2) /**< the current CUDA device if there is one, else the host backend */

#define SYMMAR_UNIQUE_ID_BYTES 128
/** Opaque rendezvous token made by symmarGetUniqueId on one rank and shared with all others. */
typedef struct {
  char internal[SYMMAR_UNIQUE_ID_BYTES];
} symmarUniqueId;

/** Communicator configuration; start from SYMMAR_CONFIG_INIT. */
typedef struct {
  size_t size;          /**< sizeof(symmarConfig_t): lets the struct grow without breaking the ABI */
  int device;           /**< CUDA ordinal, SYMMAR_DEVICE_CPU or SYMMAR_DEVICE_AUTO */
  size_t staging_bytes; /**< symmetric staging buffer per rank; 0 = library default */
  int timeout_ms;       /**< bound on every wait (bootstrap, barriers); 0 = default; <0 = invalid */
  const char* table_file; /**< optional tuning-table file; NULL = env SYMMAR_TABLE_FILE or built-in */
} symmarConfig_t;

/** A valid config with every field at its default: `symmarConfig_t cfg = SYMMAR_CONFIG_INIT;` */
#define SYMMAR_CONFIG_INIT \
  { sizeof(symmarConfig_t), SYMMAR_DEVICE_AUTO, 0, 0, NULL }

/**
 * Creates a rendezvous id; call on one rank (normally rank 0's process) and share it. An id
 * serves exactly one comm: a second rank 0, or a rank joining after the comm formed, gets
 * symmarInvalidUsage. The id reserves a TCP port (bound, not listening) while this process keeps
 * it; rank 0 listens on that port in any process of the same user (this one, a forked child, or a
 * freshly started one such as torch.multiprocessing.spawn's), so the id may be made in a parent
 * that takes no part in the comm. At most 64 unused reservations stay open per process
 * (docs/integration.md, "Unique ids").
 */
symmarResult_t symmarGetUniqueId(symmarUniqueId* id);
/** Collective: every rank calls with the same id and nranks. config may be NULL (defaults). */
symmarResult_t symmarCommInitRank(symmarComm_t* comm, int nranks, symmarUniqueId id, int rank,
                                  const symmarConfig_t* config);

/**
 * Engine-supplied allgather: gathers bytes_per_rank bytes from every rank into recvbuf (rank order).
 * Returns 0 on success. It must stay callable for the comm's lifetime (collective memory calls use it).
 * symmar calls it synchronously on the calling thread and waits for it to return: config.timeout_ms
 * bounds symmar's own waits, not the callback's. A callback that can block (a peer that never calls)
 * must bound itself and return non-zero on expiry; the Python engines' adapters (symmar.torch,
 * symmar.mpi) do, with the comm's timeout.
 */
typedef int (*symmarAllGatherFn)(const void* sendbuf, void* recvbuf, size_t bytes_per_rank, void* user);
/** Collective: creates a comm through the engine's own allgather (e.g. its process group). */
symmarResult_t symmarCommInitExternal(symmarComm_t* comm, int nranks, int rank, symmarAllGatherFn allgather,
                                      void* user, const symmarConfig_t* config);
/**
 * Creates nranks comms in this process (devices may repeat; NULL = config's device for all).
 * On the host backend each comm's collectives must then be called from its own thread.
 */
symmarResult_t symmarCommInitAll(symmarComm_t* comms, int nranks, const int* devices, const symmarConfig_t* config);
/**
 * Releases everything the comm holds; valid on a failed comm. Not collective. Must not race other
 * calls on the same comm: while another thread is inside a call it returns symmarInvalidUsage and
 * destroys nothing. Any call on a destroyed comm returns symmarInvalidUsage.
 * Every wait of the library is bounded (config.timeout_ms), so a call whose peers are gone returns
 * an error instead of hanging; after such a failure, destroying the comm is how to abandon it
 * (there is no separate abort call).
 */
symmarResult_t symmarCommDestroy(symmarComm_t comm);

/* ---- Queries ---- */

/** Rank and world size of a comm. */
symmarResult_t symmarCommRank(symmarComm_t comm, int* rank);
symmarResult_t symmarCommCount(symmarComm_t comm, int* nranks);

/** Describes a machine without touching it: used by the planner, the tuner, tools and tests. */
typedef struct {
  int cc_major, cc_minor; /**< compute capability; 0,0 for the host backend */
  symmarLink_t link;
  int world_size;
  int multicast; /**< 1 if every rank can join a multicast object */
} symmarTopology_t;

/** The comm's probed topology. */
symmarResult_t symmarCommTopology(symmarComm_t comm, symmarTopology_t* topo);
/**
 * Where this rank sits: the comm's number of hosts (1 when every rank shares one), this rank's host
 * (hosts numbered in the order of their lowest rank), its index among its host's ranks (in rank
 * order) and the number of ranks on its host. Host identity comes from the bootstrap (hostname and
 * boot id, or SYMMAR_HOST_ID). Any pointer may be NULL.
 */
symmarResult_t symmarCommHostLayout(symmarComm_t comm, int* hosts, int* host, int* local_rank, int* local_size);
/**
 * One line describing the comm for logs and benchmark headers: backend, topology and the table row
 * in use with its thresholds and source, then the reduce-scatter and all-gather rows' thresholds
 * (whole-buffer bytes). Truncated to len bytes (always NUL-terminated).
 */
symmarResult_t symmarCommDescribe(symmarComm_t comm, char* buf, size_t len);
/** "auto","oneshot","twoshot","multimem","nccl","mpi","lamport"; "unknown" for out-of-range values. */
const char* symmarAlgoName(symmarAlgo_t algo);
/** Size in bytes of one element of dtype; 0 for an invalid dtype. */
size_t symmarTypeSize(symmarDataType_t dtype);
/** Pure planner: what symmarAlgoAuto would run for this request on this topology. */
symmarResult_t symmarPlan(const symmarTopology_t* topo, size_t count, symmarDataType_t dtype, symmarRedOp_t op,
                          symmarAlgo_t* algo);
/** What the comm would run (its real topology, its loaded tables, its available fallback). */
symmarResult_t symmarCommPlan(symmarComm_t comm, size_t count, symmarDataType_t dtype, symmarRedOp_t op,
                              symmarAlgo_t* algo);

/* ---- Symmetric memory ---- */

/** Collective: allocates a symmetric buffer (same offset on every rank); inputs in it are zero-copy. */
symmarResult_t symmarMemAlloc(symmarComm_t comm, size_t bytes, void** ptr);
/** Collective: frees a buffer from symmarMemAlloc. */
symmarResult_t symmarMemFree(symmarComm_t comm, void* ptr);

/* ---- Collectives ---- */

/**
 * Allreduce of count elements. sendbuf == recvbuf is in place. count == 0 moves no data (the buffers
 * may be NULL) and succeeds; on the host backend it still takes part in call matching. The result is
 * bitwise identical on every rank. Host backend: complete on return, stream must be NULL. GPU:
 * stream-ordered on the cudaStream_t, capturable in a CUDA graph.
 */
symmarResult_t symmarAllReduce(const void* sendbuf, void* recvbuf, size_t count, symmarDataType_t dtype,
                               symmarRedOp_t op, symmarComm_t comm, void* stream);
/** As symmarAllReduce with one algorithm forced; symmarUnsupported if it cannot serve. */
symmarResult_t symmarAllReduceAlgo(const void* sendbuf, void* recvbuf, size_t count, symmarDataType_t dtype,
                                   symmarRedOp_t op, symmarAlgo_t algo, symmarComm_t comm, void* stream);

/**
 * Reduce-scatter: sendbuf holds nranks blocks of recvcount elements; rank r receives in recvbuf the
 * reduction over the ranks of block r. In place when recvbuf == sendbuf + rank * recvcount
 * elements (NCCL's rule); any other overlap is refused before anything is written. recvcount == 0
 * moves no data (buffers may be NULL) and, on the host backend, still takes part in call matching.
 * fp16/bf16 accumulate in fp32, in rank order: every rank's block is reduced the same way, so a
 * reduce-scatter followed by an all-gather gives every rank the same bits. Host backend: complete
 * on return, stream must be NULL. Served by symmarAlgoOneShot (and symmarAlgoLamport for small
 * blocks on one host) on a host comm that shares memory, by the fallbacks (nccl, mpi) elsewhere.
 */
symmarResult_t symmarReduceScatter(const void* sendbuf, void* recvbuf, size_t recvcount, symmarDataType_t dtype,
                                   symmarRedOp_t op, symmarComm_t comm, void* stream);
/** As symmarReduceScatter with one algorithm forced; symmarUnsupported if it cannot serve. */
symmarResult_t symmarReduceScatterAlgo(const void* sendbuf, void* recvbuf, size_t recvcount, symmarDataType_t dtype,
                                       symmarRedOp_t op, symmarAlgo_t algo, symmarComm_t comm, void* stream);
/**
 * All-gather: every rank's sendcount elements land in recvbuf, rank r's at recvbuf + r * sendcount
 * elements. In place when sendbuf == recvbuf + rank * sendcount elements (NCCL's rule); any other
 * overlap is refused before anything is written. sendcount == 0 as for symmarReduceScatter. Host
 * backend: complete on return, stream must be NULL.
 */
symmarResult_t symmarAllGather(const void* sendbuf, void* recvbuf, size_t sendcount, symmarDataType_t dtype,
                               symmarComm_t comm, void* stream);
/** As symmarAllGather with one algorithm forced; symmarUnsupported if it cannot serve. */
symmarResult_t symmarAllGatherAlgo(const void* sendbuf, void* recvbuf, size_t sendcount, symmarDataType_t dtype,
                                   symmarAlgo_t algo, symmarComm_t comm, void* stream);

/* ---- Fused allreduce + residual add + RMSNorm ---- */

/**
 * Arguments of the fused allreduce + residual add + RMSNorm (+ FP8 output) that ends a decoder
 * block in tensor parallelism. For a [tokens, hidden] partial output on every rank:
 *   residual_out = allreduce_sum(input) + residual_in          (residual_in NULL: + 0)
 *   norm_out     = residual_out * rsqrt(mean_row(residual_out^2) + eps) * gamma
 *   fp8_out      = E4M3(norm / fp8_scale), rounded to nearest even, saturated at +-448 (optional)
 * The sum and the statistics are fp32: the sum is rounded once to dtype (residual_out), the row
 * statistics are taken over residual_out as stored, norm_out is rounded from fp32, and fp8_out is
 * quantized from the fp32 norm. Every rank gets the same bits.
 * Buffers are [tokens, hidden] of dtype (gamma [hidden]; fp8_out one byte an element), aligned to
 * the element size. residual_out may be input or residual_in (in place); norm_out may be input or
 * residual_in but not residual_out; fp8_out overlaps nothing; other overlaps are refused.
 */
typedef struct {
  const void* input;       /**< this rank's partial output */
  const void* residual_in; /**< or NULL */
  void* residual_out;
  void* norm_out;
  const void* gamma;       /**< RMSNorm weight, [hidden] of dtype */
  void* fp8_out;           /**< or NULL */
  float fp8_scale;         /**< per-tensor scale, > 0 when fp8_out is set */
  float eps;               /**< >= 0 */
  size_t tokens;
  size_t hidden;
  symmarDataType_t dtype;  /**< symmarFloat32, symmarFloat16 or symmarBfloat16 */
} symmarAddRmsNormArgs_t;

/**
 * Collective: the fused call above. Its form comes from the tables' rows for this call
 * (collective "addrmsnorm", sized by tokens x hidden elements: lamport, one-shot or two-shot, and
 * past the last threshold the allreduce, then the add and norm on each rank; lamport only on GPU
 * comms with peer access, for rows of whole 16-byte vectors and calls of at most 256 KiB, the
 * next entry otherwise); where there are none, it is
 * planned like an allreduce of that size (the one-shot form where the tables say one-shot or
 * lamport, the two-shot form otherwise). With fewer tokens than ranks a two-shot so chosen gives way to the one-shot where
 * the allreduce of those bytes is a one-shot, and to the allreduce, then the add and norm, where not. A comm without a fused
 * form (no shared memory) runs the allreduce, then the add and norm on each rank. tokens or hidden 0 succeeds and moves
 * nothing (buffers may be NULL; on the host backend it still takes part in call matching, like an allreduce of count 0).
 * Where a row fits only the one-shot form's staging layout, the one-shot form runs. Host backend: stream must be NULL.
 */
symmarResult_t symmarAllReduceAddRmsNorm(const symmarAddRmsNormArgs_t* args, symmarComm_t comm, void* stream);
/**
 * As symmarAllReduceAddRmsNorm with the form forced: symmarAlgoOneShot, symmarAlgoTwoShot, or
 * symmarAlgoLamport (GPU comms with peer access only: no barrier, for the smallest batches; rows of
 * whole 16-byte vectors, at most 256 KiB a call; symmarUnsupported otherwise).
 */
symmarResult_t symmarAllReduceAddRmsNormAlgo(const symmarAddRmsNormArgs_t* args, symmarAlgo_t algo, symmarComm_t comm,
                                             void* stream);

/* ---- Fallbacks and engines ---- */

/** A host fallback allreduce (what libsymmar_mpi installs for symmarAlgoMpi). Returns a result code. */
typedef symmarResult_t (*symmarFallbackAllReduceFn)(const void* sendbuf, void* recvbuf, size_t count,
                                                    symmarDataType_t dtype, symmarRedOp_t op, void* user);
/**
 * Installs the host fallback served as symmarAlgoMpi. release(user) is called on destroy (may be NULL).
 * Not collective, but every rank should install the same kind of fallback.
 */
symmarResult_t symmarCommSetFallback(symmarComm_t comm, symmarFallbackAllReduceFn fn, void (*release)(void* user),
                                     void* user);
/** A host fallback reduce-scatter (symmarReduceScatter's arguments, minus comm and stream). */
typedef symmarResult_t (*symmarFallbackReduceScatterFn)(const void* sendbuf, void* recvbuf, size_t recvcount,
                                                        symmarDataType_t dtype, symmarRedOp_t op, void* user);
/** A host fallback all-gather (symmarAllGather's arguments, minus comm and stream). */
typedef symmarResult_t (*symmarFallbackAllGatherFn)(const void* sendbuf, void* recvbuf, size_t sendcount,
                                                    symmarDataType_t dtype, void* user);
/**
 * Adds reduce-scatter and all-gather to the host fallback that symmarCommSetFallback installed
 * (called with its user pointer). Either may be NULL: that collective then has no host fallback.
 * symmarInvalidUsage when no fallback is installed; symmarCommSetFallback clears both.
 */
symmarResult_t symmarCommSetFallbackCollectives(symmarComm_t comm, symmarFallbackReduceScatterFn reduce_scatter,
                                                symmarFallbackAllGatherFn all_gather);
/** Uses the engine's ncclComm_t as the comm's fallback (not owned). */
symmarResult_t symmarCommAdoptNccl(symmarComm_t comm, void* nccl_comm);
/**
 * The inter-host stage of a comm whose ranks span several hosts: one exchange among the ranks that
 * share this rank's local index (symmarCommHostLayout), one per host. Sends sendbufs[h] (bytes
 * long) to the rank on host h and receives that rank's record for this one at recvbuf + h * bytes;
 * sendbufs[own host] is copied to recvbuf + own host * bytes. (All sendbufs equal: an allgather.)
 * A record of another length from a peer is an error. Must give up after about timeout_ms and
 * return symmarTimeout when a peer never arrives, another non-success code on an error; never
 * blocks without bound. Called from the thread that makes the collective call.
 */
typedef symmarResult_t (*symmarInterHostExchangeFn)(const void* const* sendbufs, void* recvbuf, size_t bytes,
                                                    int timeout_ms, void* user);
/**
 * Collective: installs the engine that carries the inter-host stage of a host-backend comm spanning
 * hosts with the same number of ranks on each; every rank must call it (with its own carrier over
 * its local index's ranks). With it the comm runs hierarchically: shared memory inside each host,
 * fn between hosts, partial results summed in host order so every rank gets the same bits. name
 * appears in symmarCommDescribe. On success release(user) is called on destroy (may be NULL); on
 * failure nothing is installed on any rank and user stays the caller's. symmarUnsupported on a
 * single-host comm, hosts of unequal size, or the CUDA backend (whose inter-host stage is NCCL).
 */
symmarResult_t symmarCommSetInterHost(symmarComm_t comm, symmarInterHostExchangeFn fn, void (*release)(void* user),
                                      void* user, const char* name);

/** One part of a host collective's step: the library's work for part `part` of `parts`. */
typedef void (*symmarPartFn)(void* arg, int part, int parts);
/**
 * An engine's thread pool, as a host comm's ranks may split their steps over it: calls
 * part(arg, i, parts) once for every i in [0, parts) and returns when every call has returned.
 * The calls may run at once on the pool's threads or one after another on the calling thread; a
 * part never waits for another part or for a peer, and never fails.
 */
typedef void (*symmarParallelForFn)(symmarPartFn part, void* arg, int parts, void* user);
/**
 * The threads this rank splits the copies and reductions of a host comm's large steps over (the
 * two-shot allreduce's, the reduce-scatter's, the all-gather's and the fused allreduce + add +
 * RMSNorm's, where they give each thread at least 64 KiB; SYMMAR_HOST_THREADS sets it at
 * creation). threads 1 (1..64): the calling thread alone. With run NULL the comm starts
 * threads - 1 helper threads of its own, which inherit the calling thread's CPU affinity (a thread
 * bound to one CPU gives them only that CPU: bind it to several, or pass the engine's pool). With
 * run set, each step runs as up to `threads` parts through run(part, arg, parts, user), for
 * example on the engine's OpenMP threads, which are then the only threads the comm uses; user must
 * stay valid until the comm is destroyed or this is called again. Not collective: each rank
 * chooses for itself (every element is reduced in rank order whatever the split, so the results
 * are the same bits); not while a collective of this comm runs. symmarUnsupported on a GPU comm
 * and on a comm spanning hosts.
 */
symmarResult_t symmarCommSetHostThreads(symmarComm_t comm, int threads, symmarParallelForFn run, void* user);

/* ---- Groups ---- */

/**
 * Opens a group of calls that one thread issues for several comms, e.g. every rank of
 * symmarCommInitAll driven in turn from one thread. Calls that NCCL serves are then queued by NCCL
 * and issued together at symmarGroupEnd (NCCL needs this when one thread drives several GPUs: each
 * call could otherwise block until the other ranks arrive); symmetric kernels launch at once (a
 * launch never waits for peers). Groups nest and belong to the calling thread. Host-backend calls
 * complete on return, so one thread cannot drive several host-backend ranks, grouped or not.
 */
symmarResult_t symmarGroupStart(void);
/** Closes the innermost group of this thread; symmarInvalidUsage without a matching start. */
symmarResult_t symmarGroupEnd(void);

#ifdef __cplusplus
}
#endif
#endif  // SYMMAR_SYMMAR_H_
