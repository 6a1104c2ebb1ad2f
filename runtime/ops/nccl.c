/* xent_vocab_shard_nccl: the vocabulary-parallel all-gather through NCCL
   (CUDA) or RCCL (HIP), loaded with dlopen on first use. xent neither links
   against them nor includes their headers: the four entry points below have
   the same C signatures in both (ncclResult_t and ncclDataType_t are enums,
   ncclComm_t and the stream are pointers). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

#include "runtime/backend/backend.h"

enum { NCCL_SUCCESS = 0, NCCL_INT8 = 0 };

typedef struct collective_lib {
  const char* name;             /* for messages */
  const char* sonames[3];       /* tried in order */
  pthread_once_t once;
  int loaded;
  char why[256];                /* why loading failed */
  int (*all_gather)(const void* send, void* recv, size_t count, int dtype, void* comm, void* stream);
  int (*comm_count)(const void* comm, int* count);
  int (*comm_user_rank)(const void* comm, int* rank);
} collective_lib;

static collective_lib nccl = {"NCCL", {"libnccl.so.2", "libnccl.so", NULL}, PTHREAD_ONCE_INIT, 0, "", 0, 0, 0};
static collective_lib rccl = {"RCCL", {"librccl.so.1", "librccl.so", NULL}, PTHREAD_ONCE_INIT, 0, "", 0, 0, 0};

static void load(collective_lib* lib) {
  void* so = NULL;
  for (int i = 0; !so && lib->sonames[i]; ++i) so = dlopen(lib->sonames[i], RTLD_NOW | RTLD_LOCAL);
  if (!so) {
    snprintf(lib->why, sizeof lib->why, "%s could not be loaded (%s); put it on the library path", lib->name, dlerror());
    return;
  }
  /* POSIX: a function pointer round-trips through dlsym's void*. */
  *(void**)&lib->all_gather = dlsym(so, "ncclAllGather");
  *(void**)&lib->comm_count = dlsym(so, "ncclCommCount");
  *(void**)&lib->comm_user_rank = dlsym(so, "ncclCommUserRank");
  if (!lib->all_gather || !lib->comm_count || !lib->comm_user_rank) {
    snprintf(lib->why, sizeof lib->why, "%s was loaded but lacks ncclAllGather, ncclCommCount or ncclCommUserRank",
             lib->name);
    return;
  }
  lib->loaded = 1;
}

static void load_nccl(void) { load(&nccl); }
static void load_rccl(void) { load(&rccl); }

/* The xent_all_gather_fn of each: ctx is the communicator. */
static int nccl_gather(void* comm, const void* send, void* recv, size_t bytes, void* stream) {
  return nccl.all_gather(send, recv, bytes, NCCL_INT8, comm, stream);
}
static int rccl_gather(void* comm, const void* send, void* recv, size_t bytes, void* stream) {
  return rccl.all_gather(send, recv, bytes, NCCL_INT8, comm, stream);
}

xent_status xent_vocab_shard_nccl(const xent_handle* h, xent_vocab_shard* shard, void* comm, int64_t class_offset,
                                  int64_t global_classes) {
  xent_clear_error();
  const char* fn = "xent_vocab_shard_nccl";
  if (!h) return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "%s: handle is NULL", fn);
  if (!shard) return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "%s: shard is NULL", fn);
  if (!comm) return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "%s: comm is NULL", fn);
  collective_lib* lib;
  xent_all_gather_fn gather;
  switch (h->backend->collective) {
    case XENT_COLLECTIVE_NCCL:
      pthread_once(&nccl.once, load_nccl);
      lib = &nccl, gather = nccl_gather;
      break;
    case XENT_COLLECTIVE_RCCL:
      pthread_once(&rccl.once, load_rccl);
      lib = &rccl, gather = rccl_gather;
      break;
    default:
      return xent_fail(XENT_ERROR_INVALID_ARGUMENT,
                       "%s: the handle's backend is %s; NCCL and RCCL need a CUDA or HIP handle (on the cpu backend, "
                       "set vocab_shard->all_gather yourself)", fn, h->backend->name);
  }
  if (!lib->loaded) return xent_fail(XENT_ERROR_COLLECTIVE, "%s: %s", fn, lib->why);
  int ranks = 0, rank = 0;
  int rc = lib->comm_count(comm, &ranks);
  if (rc == NCCL_SUCCESS) rc = lib->comm_user_rank(comm, &rank);
  if (rc != NCCL_SUCCESS)
    return xent_fail(XENT_ERROR_COLLECTIVE, "%s: %s could not query comm (error %d)", fn, lib->name, rc);
  shard->class_offset = class_offset;
  shard->global_classes = global_classes;
  shard->rank = rank;
  shard->ranks = ranks;
  shard->all_gather = gather;
  shard->ctx = comm;
  return XENT_OK;
}
