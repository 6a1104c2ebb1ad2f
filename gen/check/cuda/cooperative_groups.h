// xentgen --check's stand-in for cooperative_groups.h (cuda_runtime.h says
// why): the thread-block cluster's group.
#pragma once
#include "cuda_runtime.h"
namespace cooperative_groups {
struct cluster_group {
  __device__ void sync() const;
  __device__ unsigned block_rank() const;
  __device__ unsigned num_blocks() const;
  template <typename T>
  __device__ T* map_shared_rank(T* addr, unsigned rank) const;
};
__device__ cluster_group this_cluster();
}  // namespace cooperative_groups
