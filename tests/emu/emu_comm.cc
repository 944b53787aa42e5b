#include "emu/emu_comm.h"

#include "emu/emu_check.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace symmar {
namespace emu {

EmuComm::EmuComm(const EmuOptions& o)
    : o_(o), layout_(gpu::makeLayout(o.staging_bytes, o.host_staged ? 0 : o.heap_bytes, o.world)) {
  bytes_ = (layout_.total + 4095) / 4096 * 4096;
  const size_t bytes = bytes_;
  for (int r = 0; r < o.world; ++r) {
    char* base = nullptr;
    if (o.host_staged) {
      const int fd = memfd_create("symmar-emu-staging", MFD_CLOEXEC);
      if (fd < 0 || ftruncate(fd, static_cast<off_t>(bytes)) != 0) std::abort();
      void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
      close(fd);
      if (p == MAP_FAILED) std::abort();
      base = static_cast<char*>(p);
    } else {
      base = static_cast<char*>(std::aligned_alloc(4096, bytes));
      std::memset(base, 0, bytes);
    }
    // Every flag starts at the start epoch, as CudaBackend::initDeviceState sets them.
    const std::vector<char> pad = gpu::initialPad(o.epoch_start);
    std::memcpy(base + layout_.pad_off, pad.data(), pad.size());
    const std::vector<uint32_t> lamport = gpu::initialLamport(o.world);
    std::memcpy(base + layout_.lamport_off, lamport.data(), lamport.size() * sizeof(uint32_t));
    bases_.push_back(base);
    arenas_.emplace_back(layout_.heap_bytes);
    auto state = std::make_unique<gpu::DeviceState>();
    for (uint32_t& e : state->start_epoch) e = o.epoch_start;
    state->end_epoch = o.epoch_start;
    state->done_count = 0;
    state->lamport_calls = o.epoch_start;
    states_.push_back(std::move(state));
  }
  status_.resize(static_cast<size_t>(o.world));
  if (o.multicast) {
    // As the CUDA heap binds it: the staging buffers only, multicast offset 0 at staging_off.
    mc_range_.resize(layout_.staging_bytes);
    group_.mc_base = mc_range_.data();
    group_.bytes = layout_.staging_bytes;
    for (char* b : bases_) group_.ranks.push_back(b + layout_.staging_off);
    registerMulticast(&group_);
  }
}

EmuComm::~EmuComm() {
  if (o_.multicast) unregisterMulticast(&group_);
  for (char* b : bases_) {
    if (o_.host_staged) {
      munmap(b, bytes_);
    } else {
      std::free(b);
    }
  }
}

std::vector<char*> EmuComm::symmetricAlloc(size_t bytes) {
  std::vector<char*> out;
  for (int r = 0; r < o_.world; ++r) {
    size_t off = 0;
    if (!arenas_[static_cast<size_t>(r)].allocate(bytes, &off)) std::abort();
    out.push_back(bases_[static_cast<size_t>(r)] + layout_.heap_off + off);
  }
  return out;
}

gpu::LaunchContext EmuComm::context(int r) const {
  gpu::LaunchContext ctx;
  ctx.rank = r;
  ctx.world = o_.world;
  ctx.bases = bases_.data();
  ctx.mc_base = o_.multicast ? const_cast<char*>(mc_range_.data()) : nullptr;
  ctx.layout = layout_;
  ctx.have_heap = true;
  ctx.arena = &arenas_[static_cast<size_t>(r)];
  ctx.state = states_[static_cast<size_t>(r)].get();
  ctx.status = const_cast<int*>(status_[static_cast<size_t>(r)].words);
  ctx.timeout_ns = static_cast<long long>(o_.timeout_ms) * 1000000;
  ctx.max_blocks = o_.blocks;
  ctx.bytes_per_block = o_.bytes_per_block;
  ctx.lamport_bytes_per_block = o_.bytes_per_block;
  return ctx;
}

Launch EmuComm::launchOf(int r, const EmuCall& call) const {
  if (call.coll != Collective::kAllReduce) {  // the CUDA backend's scatterGather, minus the stream
    const ScatterGatherCall c{call.coll, call.send[static_cast<size_t>(r)], call.recv[static_cast<size_t>(r)],
                              call.count, call.dtype, call.op, call.algo, nullptr};
    const void* kernel = gpu::scatterGatherKernelOf(call.algo, c.coll, c.dtype, c.op, o_.multicast);
    int grid = 0;
    const gpu::KernelArgs a = gpu::makeScatterGatherArgs(context(r), c, &grid);
    return Launch{kernel, kernel ? grid : 0, a, nullptr, gpu::kThreads};
  }
  const void* kernel = gpu::kernelOf(call.algo, call.dtype, call.op, o_.multicast);
  const gpu::KernelArgs a =
      gpu::makeKernelArgs(context(r), call.send[static_cast<size_t>(r)], call.recv[static_cast<size_t>(r)], call.count,
                          call.dtype, call.algo, callSignature(call.count, call.dtype, call.op, call.algo));
  return Launch{kernel, kernel ? gpu::gridFor(context(r), call.count, call.dtype, call.algo) : 0, a, nullptr,
                gpu::threadsFor(call.algo)};
}

Launch EmuComm::addRmsNormLaunchOf(int r, const AddRmsNormCall& c, symmarAlgo_t form) const {
  int grid = 1;
  const gpu::KernelArgs a = gpu::makeAddRmsNormArgs(context(r), c, form, &grid);
  if (form == symmarAlgoLamport) {
    if (!sched::lamportFusedFits(c.tokens, c.hidden, symmarTypeSize(c.dtype))) grid = 0;
    return Launch{gpu::lamportAddRmsNormKernel(c.dtype), grid, a, nullptr, gpu::kLamportThreads};
  }
  const bool two_shot = form == symmarAlgoTwoShot;
  if (gpu::addRmsNormRowsPerChunk(context(r), c, two_shot) == 0) grid = 0;
  return Launch{gpu::addRmsNormKernel(c.dtype, two_shot), grid, a};
}

bool EmuComm::run(const EmuCall& call, const std::vector<int>& launching) {
  std::vector<int> ranks = launching;
  if (ranks.empty()) {
    for (int r = 0; r < o_.world; ++r) ranks.push_back(r);
  }
  std::vector<Launch> launches;
  for (int r : ranks) launches.push_back(launchOf(r, call));
  if (!launches.front().kernel) return false;
  runConcurrently(launches);
  return true;
}

bool EmuComm::runAddRmsNorm(const std::vector<AddRmsNormCall>& calls, symmarAlgo_t form) {
  std::vector<Launch> launches;
  for (int r = 0; r < o_.world; ++r) {
    launches.push_back(addRmsNormLaunchOf(r, calls[static_cast<size_t>(r)], form));
    if (launches.back().blocks == 0) return false;
  }
  runConcurrently(launches);
  return true;
}

std::vector<std::array<long long, 2>> EmuComm::probe(const std::vector<int>& launching, bool sequential) {
  std::vector<std::array<long long, 2>> results(launching.size(), {0, 0});
  std::vector<gpu::ProbeArgs> args;
  for (size_t i = 0; i < launching.size(); ++i) {
    args.push_back(gpu::makeProbeArgs(context(launching[i]), results[i].data()));
    // Emulated threads are far slower than a GPU's: the later rounds get the first round's bound.
    args.back().rest_ns = args.back().first_ns;
  }
  std::vector<Launch> launches;
  for (const gpu::ProbeArgs& p : args) launches.push_back(Launch{gpu::coScheduleProbeKernel(), 1, {}, &p});
  if (sequential) {
    for (const Launch& l : launches) runConcurrently({l});
  } else {
    runConcurrently(launches);
  }
  return results;
}

std::vector<std::array<long long, gpu::kProbeResultWords>> EmuComm::peerAccessProbe(uint32_t seed, int lying_from,
                                                                                    int lying_to) {
  std::vector<std::array<long long, gpu::kProbeResultWords>> results(static_cast<size_t>(o_.world));
  std::vector<char> scratch(layout_.total, 0);
  std::vector<gpu::ProbeArgs> args;
  for (int r = 0; r < o_.world; ++r) {
    args.push_back(gpu::makeProbeArgs(context(r), results[static_cast<size_t>(r)].data()));
    args.back().seed = seed;
    args.back().rest_ns = args.back().first_ns;  // emulated threads are far slower than a GPU's
    if (r == lying_from) args.back().base[lying_to] = scratch.data();
  }
  std::vector<Launch> launches;
  for (const gpu::ProbeArgs& p : args) launches.push_back(Launch{gpu::peerAccessProbeKernel(), 1, {}, &p});
  runConcurrently(launches);
  return results;
}

CallRunner::CallRunner(EmuComm& comm) : comm_(comm) {
  for (int r = 0; r < comm.world(); ++r) {
    send_.emplace_back(kMaxBytes);
    recv_.emplace_back(kMaxBytes);
  }
}

std::string CallRunner::call(symmarAlgo_t algo, symmarDataType_t dt, symmarRedOp_t op, size_t count, bool symmetric,
                             int n) {
  if (symmetric && sym_.empty()) sym_ = comm_.symmetricAlloc(kMaxBytes);
  EmuCall c{algo, dt, op, count, {}, {}};
  for (int r = 0; r < comm_.world(); ++r) {
    char* send = symmetric ? sym_[static_cast<size_t>(r)] : send_[static_cast<size_t>(r)].data();
    fillInput(dt, send, count, r, n);
    c.send.push_back(send);
    c.recv.push_back(recv_[static_cast<size_t>(r)].data());
  }
  if (!comm_.run(c)) return "no kernel";
  for (int r = 0; r < comm_.world(); ++r) {
    if (comm_.status(r)[gpu::kStatusCode] != 0) return "rank " + std::to_string(r) + " reported a failure";
  }
  return checkOutputs(dt, op, count, comm_.world(), n, c.recv);
}

}  // namespace emu
}  // namespace symmar
