/* Consumer of an installed symmar: a 1-rank host comm from symmarCommInitAll, one allreduce. */
#include <stdio.h>

#include <symmar/symmar.h>

#if !defined(SYMMAR_VERSION_CODE)
#error "symmar.h does not define SYMMAR_VERSION_CODE"
#endif

int main(void) {
  int version = 0;
  if (symmarGetVersion(&version) != symmarSuccess || version != SYMMAR_VERSION_CODE) {
    fprintf(stderr, "header %d and library %d disagree\n", SYMMAR_VERSION_CODE, version);
    return 1;
  }
  symmarConfig_t cfg = SYMMAR_CONFIG_INIT;
  cfg.device = SYMMAR_DEVICE_CPU;
  int devices[1] = {SYMMAR_DEVICE_CPU};
  symmarComm_t comm = NULL;
  symmarResult_t res = symmarCommInitAll(&comm, 1, devices, &cfg);
  if (res != symmarSuccess) {
    fprintf(stderr, "symmarCommInitAll: %s: %s\n", symmarGetErrorString(res), symmarGetLastError(NULL));
    return 1;
  }
  float x[5] = {1.0f, -2.0f, 3.5f, 0.0f, 8.0f};
  float y[5] = {0};
  res = symmarAllReduce(x, y, 5, symmarFloat32, symmarSum, comm, NULL);
  int bad = res != symmarSuccess;
  for (int i = 0; i < 5; ++i) bad |= y[i] != x[i];
  if (bad) fprintf(stderr, "allreduce: %s: %s\n", symmarGetErrorString(res), symmarGetLastError(comm));
  symmarCommDestroy(comm);
  printf("consumer: symmar %d, 1-rank allreduce %s\n", version, bad ? "FAILED" : "ok");
  return bad;
}
