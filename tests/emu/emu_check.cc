#include "emu/emu_check.h"

#include <algorithm>
#include <cstdio>

namespace symmar {
namespace emu {

std::string checkOutputs(symmarDataType_t dt, symmarRedOp_t op, size_t count, int world, int call,
                         const std::vector<void*>& recv) {
  const size_t elem = symmarTypeSize(dt);
  char text[256];
  for (size_t i = 0; i < count; ++i) {
    double ref = inputValue(0, i, call);
    for (int r = 1; r < world; ++r) {
      const double x = inputValue(r, i, call);
      ref = op == symmarSum ? ref + x : op == symmarMax ? std::max(ref, x) : std::min(ref, x);
    }
    const double got = loadAs(dt, recv[0], i);
    if (got != ref) {
      snprintf(text, sizeof(text), "element %zu of %zu: rank 0 has %g, expected %g", i, count, got, ref);
      return text;
    }
  }
  for (int r = 1; r < world; ++r) {
    if (count && std::memcmp(recv[0], recv[static_cast<size_t>(r)], count * elem) != 0) {
      snprintf(text, sizeof(text), "rank %d's output differs from rank 0's", r);
      return text;
    }
  }
  return "";
}

}  // namespace emu
}  // namespace symmar
