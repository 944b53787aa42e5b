/* Link check for symmar::symmar_mpi (not run: it needs an MPI launcher). */
#include <stdio.h>

#include <symmar/symmar_mpi.h>

int main(int argc, char** argv) {
  if (argc > 1) {  /* never taken by the test: only proves the symbols link */
    MPI_Init(&argc, &argv);
    symmarComm_t comm = NULL;
    symmarResult_t res = symmarCommInitMpi(&comm, MPI_COMM_WORLD, NULL);
    if (res == symmarSuccess) symmarCommDestroy(comm);
    MPI_Finalize();
    return res != symmarSuccess;
  }
  printf("consumer_mpi: linked\n");
  return 0;
}
