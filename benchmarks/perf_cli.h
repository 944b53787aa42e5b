// Command line and launch forms shared by symmar_perf and symmar_tune: under mpirun (one rank per
// process), --local-world N (threads of one process), or a single rank.
#pragma once
#include <functional>

#include "perf_group.h"
#include "perf_runner.h"

namespace perf {

/// Starts MPI when launched by mpirun (before argument parsing, which MPI may edit).
void startLauncher(int* argc, char*** argv);
/// Parses the nccl-tests style flags; extra(flag, value) handles tool-specific flags (returns
/// false if unknown). Returns false on an error (message printed).
bool parseArgs(int argc, char** argv, Options* opt,
               const std::function<bool(const std::string&, const char*)>& extra = nullptr);
void printUsage(const char* prog, const char* extra_usage);

/// One rank's work: returns its exit status (0 = success).
using RankBody = std::function<int(Group& group, symmarComm_t comm, int gpu_device, const char* launch_desc)>;
/// Creates the comm(s) for the launch form in use, runs body on every rank, tears down, and
/// returns the process exit status (non-zero if any rank failed).
int launch(const Options& opt, const RankBody& body);

/// nccl-tests' name of t ("float", "half", ...), for output that lines up with nccl-tests'.
const char* typeName(symmarDataType_t t);

}  // namespace perf
