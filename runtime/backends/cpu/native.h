/* The cpu backend's own cross entropy and softmax: the calls of a cpu handle
   that does not emulate a GPU rendering (xent_cpu_emulate) run here, as
   host code, rather than as the generated kernels under the SIMT emulator.
   Each row's classes are read into a buffer of the accumulation type, then
   walked by contiguous loops the compiler vectorizes; rows are spread over
   threads. The arguments are the launchers' (xent_launch.h): the same
   pointers, options and workspace, so that the layers above see no
   difference but the time. */
#ifndef XENT_CPU_NATIVE_H
#define XENT_CPU_NATIVE_H

#ifdef __cplusplus
extern "C" {
#endif

/* (The runtime's headers are C: their declarations keep C linkage here.) */
#include "runtime/backend/backend.h"

/* A cross-entropy launch of op for a call of descriptor d (its dtype, label
   type and reduction; the rest is in a). Not a vocabulary-parallel stage. */
xent_status xent_cpu_native_ce(const xent_ce_desc* d, xent_op op, const xent_ce_args* a);

/* A softmax-family launch. */
xent_status xent_cpu_native_softmax(const xent_softmax_desc* d, xent_op op, const xent_softmax_args* a);

/* The two above as built for each instruction set (native_rows.cc), which
   they choose between (native.c). */
xent_status xent_cpu_native_ce_sse2(const xent_ce_desc* d, xent_op op, const xent_ce_args* a);
xent_status xent_cpu_native_softmax_sse2(const xent_softmax_desc* d, xent_op op, const xent_softmax_args* a);
xent_status xent_cpu_native_ce_avx2(const xent_ce_desc* d, xent_op op, const xent_ce_args* a);
xent_status xent_cpu_native_softmax_avx2(const xent_softmax_desc* d, xent_op op, const xent_softmax_args* a);

/* Threads a call may use: OpenMP's (OMP_NUM_THREADS, else the CPUs), or
   without OpenMP the CPUs this process may run on, OMP_NUM_THREADS where
   it says fewer (PyTorch's convention too). */
int xent_cpu_threads(void);

#ifdef __cplusplus
}
#endif

#endif
