// Everything that differs between targets (warp width, shuffles, half types,
// launch syntax, error query), chosen by XENT_TARGET_CUDA or XENT_TARGET_HIP
// (each generated unit defines one), so the kernels are written once for all.
#pragma once

#include <stdint.h>
#include <float.h>
#include <string.h>

#if defined(XENT_TARGET_CUDA) && !defined(XENT_TARGET_HIP)
#include "target_cuda.h"
#elif defined(XENT_TARGET_HIP) && !defined(XENT_TARGET_CUDA)
#include "target_hip.h"
#else
#error "define one of XENT_TARGET_CUDA and XENT_TARGET_HIP before including xent_device.h"
#endif

// A load from and a store to global memory where buffers may alias (the
// logits and a gradient written over them, a softmax over its input): the
// emulator's race detector sees them (xent_emu_check_global); on a GPU they
// are a plain load and store.
#if defined(XENT_EMU)
#define XENT_LD(p) xent_emu::global_load((p), __FILE__, __LINE__)
#define XENT_ST(p, v) xent_emu::global_store((p), (v), __FILE__, __LINE__)
#else
#define XENT_LD(p) (*(p))
#define XENT_ST(p, v) ((void)(*(p) = (v)))
#endif

// Whether p holds in any thread of the block: a barrier (every thread of the
// block calls it), and every thread gets the same answer, so a branch on it
// is uniform across the block.
XENT_DEVICE bool xent_block_any(bool p) { return __syncthreads_or(p) != 0; }

// The largest block any launcher uses; sizes the cross-warp scratch arrays.
#define XENT_MAX_THREADS 1024

// The launch bounds' minimum of resident blocks per SM for the strided
// (XENT_COLUMN) shape, whose loads in flight scale with resident threads:
// `resident` threads per SM in blocks of `threads`. On CUDA it caps the
// registers ptxas may use (65536 / resident each) so that many fit; HIP reads
// the second argument differently (waves per execution unit), so it asks
// nothing there.
// (Defined per target: target_cuda.h, target_hip.h.)
#define XENT_MAX_WARPS (XENT_MAX_THREADS / XENT_WARP)

// A loop the GPU compilers unroll (host compilers under the emulator do as
// they see fit).
#if defined(XENT_EMU)
#define XENT_UNROLL
#else
#define XENT_UNROLL _Pragma("unroll")
#endif
