#include "emu/emu_check.h"

#include <cstdio>
#include <cstring>

namespace symmar {
namespace emu {

std::string checkOutputs(symmarDataType_t dt, symmarRedOp_t op, size_t count, int world, int call,
                         const std::vector<void*>& recv) {
  std::vector<double> want(count);
  for (size_t i = 0; i < count; ++i) {
    want[i] = testref::reduceRanks(dt, op, world, [&](int r) { return inputValue(r, i, call); });
  }
  // The inputs are small integers: every sum is exact, so rank 0's result must be the reference.
  const std::string wrong = testref::checkResult(dt, recv[0], want.data(), count, world, testref::Match::kExact);
  if (!wrong.empty()) return "rank 0: " + wrong;
  const size_t bytes = count * testref::elementSize(dt);
  for (int r = 1; r < world; ++r) {
    if (count && std::memcmp(recv[0], recv[static_cast<size_t>(r)], bytes) != 0) {
      char text[64];
      snprintf(text, sizeof(text), "rank %d's output differs from rank 0's", r);
      return text;
    }
  }
  return "";
}

}  // namespace emu
}  // namespace symmar
