/* The HIP-on-CUDA shim's wavefront exchange (runtime/hip_on_cuda), alone,
   on an NVIDIA GPU: the xor-32 step of a 64-lane shuffle, which crosses the
   two warps of a wavefront through shared memory.

     hip_on_cuda_exchange_test            every block size, the shim's exchange:
                                          each thread must get its partner's
                                          value, in every round
     hip_on_cuda_exchange_test --planted  the same with the exchange's first
                                          barrier left out (a warp may write its
                                          half while its partner still reads the
                                          last round's): the run to put under
                                          compute-sanitizer's racecheck, which
                                          must report it

   Under racecheck, the first form must be clean and the second must not:
   that is how a GPU session shows that racecheck sees the barriers the shim
   uses, the named barriers up to 15 wavefronts and the mbarriers of a
   16-wavefront block (bench/gpu/stage.sh runs both). Each wavefront takes a
   different number of rounds, so the wavefronts of a block never exchange
   in step: a barrier shared by the block would hang here.

   Built by nvcc alone: nvcc -arch=sm_90 -Iruntime/hip_on_cuda
   tests/hip_on_cuda_exchange_test.cu. Exit status 0 when every exchange
   returned the partner's value. */
#include <cstdio>
#include <cstring>

#include "hip/hip_runtime.h"

// The exchange without its first barrier: the planted race.
__device__ unsigned long long planted_exchange32(unsigned long long v) {
  const unsigned t = threadIdx.x;
  unsigned long long* halves = xent_hip_on_cuda_halves();
  halves[t] = v;
  xent_hip_on_cuda_wave_barrier();
  return halves[t ^ 32];
}

__global__ void exchange_rounds(int planted, unsigned* wrong) {
  xent_hip_on_cuda_block_begin();
  const unsigned t = threadIdx.x, wave = t / XENT_HIP_ON_CUDA_WAVE;
  for (unsigned round = 0; round < 4 + 3 * wave; ++round) {
    const unsigned long long mine = ((unsigned long long)(blockIdx.x * 1024 + t) << 32) | round;
    const unsigned long long want = ((unsigned long long)(blockIdx.x * 1024 + (t ^ 32)) << 32) | round;
    const unsigned long long got = planted ? planted_exchange32(mine) : xent_hip_on_cuda_exchange32(mine);
    if (got != want) atomicAdd(wrong, 1u);
  }
}

int main(int argc, char** argv) {
  const int planted = argc > 1 && strcmp(argv[1], "--planted") == 0;
  unsigned* wrong = nullptr;
  if (cudaMalloc(&wrong, sizeof *wrong) != cudaSuccess) {
    fprintf(stderr, "cudaMalloc failed\n");
    return 2;
  }
  int failed = 0;
  // One wavefront; 15 (the named barriers' largest); 16 (the mbarriers).
  for (int threads : {64, 960, 1024}) {
    unsigned host = 0;
    cudaMemset(wrong, 0, sizeof *wrong);
    exchange_rounds<<<8, threads>>>(planted, wrong);
    const cudaError_t e = cudaDeviceSynchronize();
    cudaMemcpy(&host, wrong, sizeof host, cudaMemcpyDeviceToHost);
    if (e != cudaSuccess) {
      printf("FAIL %d threads: %s\n", threads, cudaGetErrorString(e));
      return 1;  // the context is gone
    }
    printf("%s %d threads a block (%d wavefronts): %u wrong exchanges\n", host ? "FAIL" : "ok", threads,
           threads / XENT_HIP_ON_CUDA_WAVE, host);
    failed |= host != 0;
  }
  cudaFree(wrong);
  return failed;
}
