// Names of enum values, shared by the planner, the table file, the env parser and the tools.
#pragma once
#include <cstddef>
#include <cstdint>

#include "symmar/symmar.h"

namespace symmar {

/// Parses an algorithm name of symmarAlgoName (case-insensitive). False if unknown.
bool parseAlgoName(const char* name, symmarAlgo_t* algo);
/// Parses "nvswitch", "nvlink", "pcie", "host". False if unknown.
bool parseLinkName(const char* name, symmarLink_t* link);
const char* linkName(symmarLink_t link);
const char* dtypeName(symmarDataType_t dtype);
const char* opName(symmarRedOp_t op);
/// Parses a comma list of algorithm names into a bitmask (1 << algo). False on an unknown name.
bool parseAlgoList(const char* list, uint32_t* mask);

inline bool validDtype(int d) { return d >= 0 && d < symmarNumTypes; }
inline bool validOp(int o) { return o >= 0 && o < symmarNumOps; }
inline bool validAlgo(int a) { return a >= 0 && a < symmarNumAlgos; }
inline constexpr uint32_t algoBit(symmarAlgo_t a) { return 1u << static_cast<int>(a); }

}  // namespace symmar
