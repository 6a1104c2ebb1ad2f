/* xentgen --check: every rendered kernel file parsed in-process by libclang,
   from the generator's memory before anything is written, and its syntax
   tree held to the rules (rules.h). A finding is printed as
   templates/<file>.tmpl:<line>: <rule>: <what> (the #line directives map
   rendered code back to its template); any finding fails the run and
   nothing is written.

   What is parsed is the code the GPU compilers get, device and host
   (launchers) alike, in a mode clang 19 can read: the HIP rendering as HIP
   device code against ROCm's own headers (-x hip --cuda-device-only
   -nogpulib), the CUDA rendering as CUDA device code for sm_90 against
   stand-in CUDA headers (-x cuda --cuda-device-only -nocudainc, with
   gen/check/cuda: CUDA 13's own headers are beyond clang 19; the stand-ins
   declare the runtime API, intrinsics and types the rendering uses). The
   shared headers (the device library kernels/xent_device.h, and the rendered
   xent_launch.h) go into one precompiled header per run; a finding in the
   library prints kernels/<header>:<line>. The HIP rendering is also parsed as the HIP-on-CUDA
   build compiles it (hip_on_cuda_headers below). */
#ifndef XENT_GEN_CHECK_H
#define XENT_GEN_CHECK_H

#include "gen/error.h"
#include "gen/fileio.h"

typedef struct gen_check_options {
  const char* target;    /* "cuda" or "hip" */
  const char* cuda_headers; /* for cuda: the stand-in CUDA headers (default gen/check/cuda) */
  const char* device_headers; /* the device library (kernels/, holding xent_device.h) */
  /* For hip: when set, the HIP rendering as nvcc compiles it for NVIDIA
     GPUs instead (runtime/hip_on_cuda, this directory): CUDA device code
     against the stand-in CUDA headers and the HIP-on-CUDA headers, where a
     64-lane wavefront is two 32-lane warps and its shuffles synchronise
     them, so the rules see those synchronisations. */
  const char* hip_on_cuda_headers;
  int verbose;           /* print the files, nodes and time */
} gen_check_options;

/* Checks every rendered .cu/.hip file of `outputs`. Returns 0 when no rule
   is broken; otherwise prints the findings to stderr, sets err and returns
   -1 (also when a file does not parse). */
int gen_check_outputs(const gen_output_set* outputs, const gen_check_options* opt, gen_error* err);

#endif
