// Names of enum values, shared by the planner, the table file, the env parser and the tools.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/call.h"
#include "symmar/symmar.h"

namespace symmar {

/// "allreduce", "reducescatter" or "allgather" (symmar_perf -C takes these names).
const char* collectiveName(Collective coll);
/// Parses a name of collectiveName (case-insensitive). False if unknown.
bool parseCollectiveName(const char* name, Collective* coll);

/// The name symmarAlgoName returns; "unknown" outside the enum. Takes the raw int because C
/// callers may pass any value, and loading an out-of-range one as the C++ enum is undefined.
const char* algoName(int algo);
/// Parses an algorithm name of algoName (case-insensitive). False if unknown.
bool parseAlgoName(const char* name, symmarAlgo_t* algo);
/// Parses a link name of linkName other than "unknown" (case-insensitive). False if unknown.
bool parseLinkName(const char* name, symmarLink_t* link);
/// "unknown", "nvswitch", "nvlink", "pcie", "host", "pcie-nop2p"; "unknown" outside the enum.
const char* linkName(symmarLink_t link);
/// "float32", "float16", "bfloat16", "int32", "float64"; "unknown" outside the enum.
const char* dtypeName(symmarDataType_t dtype);
/// Inverse of dtypeName (case-insensitive). False if unknown.
bool parseDtypeName(const char* name, symmarDataType_t* dtype);
/// "sum", "max", "min"; "unknown" outside the enum.
const char* opName(symmarRedOp_t op);
/// Inverse of opName (case-insensitive). False if unknown.
bool parseOpName(const char* name, symmarRedOp_t* op);
/// Every concrete algorithm's name (not "auto") in enum order, joined by sep: for texts that list
/// them.
std::string algoNameList(const char* sep);
/// Parses a comma list of algorithm names into a bitmask (1 << algo). False on an unknown name.
bool parseAlgoList(const char* list, uint32_t* mask);

inline bool validDtype(int d) { return d >= 0 && d < symmarNumTypes; }
inline bool validOp(int o) { return o >= 0 && o < symmarNumOps; }
inline bool validAlgo(int a) { return a >= 0 && a < symmarNumAlgos; }
inline constexpr uint32_t algoBit(symmarAlgo_t a) { return 1u << static_cast<int>(a); }

}  // namespace symmar
