/* The CUDA runtime stand-in of tests/fake_cudart.c: its state, for tests to
   set up and read. */
#ifndef XENT_TESTS_FAKE_CUDART_H
#define XENT_TESTS_FAKE_CUDART_H

#include <cuda_runtime_api.h>
#include <stddef.h>

#define FAKE_MAX_CALLS 4096
#define FAKE_MAX_FUNCS 256
#define FAKE_MAX_DEVICES 2

typedef enum fake_call_kind {
  FAKE_SET_DEVICE,    /* value: the device */
  FAKE_MEMSET,        /* cudaMemset (the legacy stream) */
  FAKE_MEMSET_ASYNC,  /* stream: its stream */
  FAKE_MEMCPY,
  FAKE_MEMCPY_ASYNC,  /* stream: its stream */
  FAKE_SYNC,          /* cudaDeviceSynchronize */
  FAKE_STREAM_SYNC,   /* cudaStreamSynchronize; stream: the stream */
  FAKE_SET_ATTRIBUTE, /* cudaFuncAttributeMaxDynamicSharedMemorySize = value */
  FAKE_LAUNCH         /* bytes: dynamic shared memory; cluster: blocks per cluster; value: the grid's y;
                         grid_x: its x */
} fake_call_kind;

typedef struct fake_call {
  fake_call_kind kind;
  int device; /* current when called */
  const void* func;
  const void* stream;
  size_t bytes;
  unsigned cluster;
  int value;
  unsigned grid_x;
} fake_call;

typedef struct fake_func {
  const void* func;
  int device;
  int max_dynamic;
  int sets;
} fake_func;

typedef struct fake_cuda_state {
  int devices;
  int optin[FAKE_MAX_DEVICES];    /* cudaDevAttrMaxSharedMemoryPerBlockOptin */
  int clusters[FAKE_MAX_DEVICES]; /* cudaDevAttrClusterLaunch */
  int cc[FAKE_MAX_DEVICES];       /* compute capability, major * 10 + minor; 0: 9.0 */
  int ptx_version;                /* every kernel's cudaFuncAttributes.ptxVersion */
  size_t static_smem;             /* every kernel's sharedSizeBytes */
  fake_call calls[FAKE_MAX_CALLS];
  int ncalls;
  fake_func funcs[FAKE_MAX_FUNCS];
  int nfuncs;
} fake_cuda_state;

extern fake_cuda_state fake_cuda;

/* What other code would leave in the calling thread's last-error slot. */
void fake_cuda_set_last_error(int err);
int fake_cuda_current_device(void);
void fake_cuda_set_current_device(int device);

#endif
