/* The CUDA backend and the CUDA launchers (compiled by nvcc, as a GPU build
   links them) against a recording stand-in of the CUDA runtime
   (tests/fake_cudart.c: two GPUs, no kernel ever runs), for what the first
   H100 run would otherwise find out at launch:
   - the on-chip kernels' cudaFuncAttributeMaxDynamicSharedMemorySize is
     raised before any launch that needs it (C = 24,576 and 49,152: dynamic
     requests of exactly 48 KiB, which with the static shared memory pass
     the default limit), once per kernel and device, to the opt-in maximum
     less the static reserve;
   - clusters from the kernel's own code version: with code built for
     compute_80 (ptxVersion 80) no launch asks for a cluster;
   - every call runs on the handle's device whatever is current, and puts
     the caller's current device back;
   - an error that other code left pending in the runtime is neither
     reported as xent's nor cleared;
   - xent_check waits for its reset of the bad-label record to land;
   - xent_create refuses a GPU that none of the build's code runs on
     (xent_cuda_archs.h: the architectures the kernels were compiled for),
     naming its compute capability and the build's architectures, and takes
     one that a cubin of its major or the PTX serves.
   The oracle is the runtime's contract (the CUDA documentation); the fake
   refuses what the driver refuses. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/xent.h"
#include "tests/fake_cudart.h"
#include "xent_cuda_archs.h"

#define STATIC_RESERVE 2048 /* xent_device.h's XENT_STATIC_SMEM */

static int checks, failures;

static void expect(int ok, const char* what) {
  checks++;
  if (!ok) {
    failures++;
    printf("FAIL %s\n", what);
  }
}

/* One fused bf16 call (mean over hard labels) of rows x C on fake memory. */
static xent_status fused(xent_handle* h, int64_t rows, int64_t C) {
  xent_ce_desc d;
  xent_ce_desc_init(&d, rows, C, XENT_BF16, XENT_I64, XENT_REDUCTION_MEAN);
  void *logits = calloc((size_t)(rows * C), 2), *grad = calloc((size_t)(rows * C), 2),
       *labels = calloc((size_t)rows, 8), *loss = calloc(1, 4), *lse = calloc((size_t)rows, 4);
  size_t ws_bytes = 0;
  xent_status s = xent_ce_workspace_size(h, &d, XENT_OP_FORWARD_BACKWARD, &ws_bytes);
  void* ws = calloc(ws_bytes ? ws_bytes : 1, 1);
  if (s == XENT_OK)
    s = xent_ce_forward_backward(h, &d, logits, labels, NULL, NULL, loss, lse, grad, ws, ws_bytes, NULL);
  free(logits);
  free(grad);
  free(labels);
  free(loss);
  free(lse);
  free(ws);
  return s;
}

/* One bf16 forward (mean over hard labels) of [outer, C, inner] logits,
   the class axis in place, on fake memory. */
static xent_status strided_forward(xent_handle* h, int64_t outer, int64_t C, int64_t inner) {
  xent_ce_desc d;
  xent_ce_desc_init(&d, outer * inner, C, XENT_BF16, XENT_I64, XENT_REDUCTION_MEAN);
  d.inner = inner;
  void *logits = calloc((size_t)(outer * C * inner), 2), *labels = calloc((size_t)(outer * inner), 8),
       *loss = calloc(1, 4);
  size_t ws_bytes = 0;
  xent_status s = xent_ce_workspace_size(h, &d, XENT_OP_FORWARD, &ws_bytes);
  void* ws = calloc(ws_bytes ? ws_bytes : 1, 1);
  if (s == XENT_OK) s = xent_ce_forward(h, &d, logits, labels, NULL, loss, NULL, ws, ws_bytes, NULL);
  free(logits);
  free(labels);
  free(loss);
  free(ws);
  return s;
}

/* The largest grid.x of the launches from index `from` on with `bytes` of
   dynamic shared memory (the on-chip ones). */
static unsigned most_grid_x(int from, size_t bytes) {
  unsigned most = 0;
  for (int i = from; i < fake_cuda.ncalls; ++i) {
    const fake_call* c = &fake_cuda.calls[i];
    if (c->kind == FAKE_LAUNCH && c->bytes == bytes && c->grid_x > most) most = c->grid_x;
  }
  return most;
}

/* The largest grid.y of the launches from index `from` on. */
static int most_grid_y(int from) {
  int y = 0;
  for (int i = from; i < fake_cuda.ncalls; ++i)
    if (fake_cuda.calls[i].kind == FAKE_LAUNCH && fake_cuda.calls[i].value > y) y = fake_cuda.calls[i].value;
  return y;
}

/* The recorded calls from index `from` on. */
static int count(int from, fake_call_kind kind) {
  int n = 0;
  for (int i = from; i < fake_cuda.ncalls; ++i) n += fake_cuda.calls[i].kind == kind;
  return n;
}

static int launches_with(int from, size_t bytes, unsigned cluster) {
  int n = 0;
  for (int i = from; i < fake_cuda.ncalls; ++i) {
    const fake_call* c = &fake_cuda.calls[i];
    n += c->kind == FAKE_LAUNCH && c->bytes == bytes && c->cluster == cluster;
  }
  return n;
}

static int all_on(int from, int device) {
  for (int i = from; i < fake_cuda.ncalls; ++i)
    if (fake_cuda.calls[i].kind != FAKE_SET_DEVICE && fake_cuda.calls[i].device != device) return 0;
  return 1;
}

/* xent_create on device 0, made a GPU of compute capability cc: the
   status, with the message checked for the architectures where refused. */
static xent_status create_on(int cc) {
  fake_cuda.cc[0] = cc;
  xent_handle* h = NULL;
  const xent_status s = xent_create_on_device(&h, XENT_BACKEND_CUDA, 0);
  xent_destroy(h);
  return s;
}

static void test_device_code(void) {
  const int saved[2] = {fake_cuda.cc[0], fake_cuda.cc[1]};
  static const int sass[] = XENT_CUDA_SASS_ARCHS, exact[] = XENT_CUDA_SASS_EXACT;
  const int n = (int)(sizeof sass / sizeof sass[0]), ptx = XENT_CUDA_PTX_ARCH;
  char what[512];
  /* Turing (sm_75): older than any architecture xent builds for. */
  expect(create_on(75) == XENT_ERROR_UNSUPPORTED_DEVICE, "sm_75 is refused at xent_create");
  expect(strstr(xent_last_error(), "device 0 is sm_75 (compute capability 7.5)") &&
             strstr(xent_last_error(), "--define=xent_cuda_archs=75"),
         "the refusal names the device's capability and the fix");
  for (int i = 0; i < n && sass[i] > 0; ++i) {
    snprintf(what, sizeof what, "sm_%d%s", sass[i], exact[i] == 1 ? "a" : exact[i] == 2 ? "f" : "");
    expect(strstr(xent_last_error(), what) != NULL, "the refusal names each architecture built");
  }
  if (ptx) {
    snprintf(what, sizeof what, "the PTX of compute_%d", ptx);
    expect(strstr(xent_last_error(), what) != NULL, "the refusal names the PTX built");
  }
  xent_handle* auto_h = NULL;
  fake_cuda.cc[0] = 75;
  fake_cuda.cc[1] = 75;
  expect(xent_create(&auto_h, XENT_BACKEND_AUTO) == XENT_OK && xent_handle_backend(auto_h) == XENT_BACKEND_CPU,
         "AUTO on GPUs no code runs on is the cpu");
  xent_destroy(auto_h);
  fake_cuda.cc[1] = saved[1];
  for (int i = 0; i < n && sass[i] > 0; ++i) {
    snprintf(what, sizeof what, "a GPU of sm_%d runs its own cubin", sass[i]);
    expect(create_on(sass[i]) == XENT_OK, what);
    /* A later GPU of the same major (10.3 for sm_100, 12.1 for sm_120)
       runs it too, an "a" cubin excepted. */
    if (exact[i] != 1 && sass[i] % 10 != 9) {
      snprintf(what, sizeof what, "a GPU of sm_%d runs sm_%d's cubin", sass[i] + 1, sass[i]);
      expect(create_on(sass[i] + 1) == XENT_OK, what);
    }
  }
  /* Past every architecture: the driver compiles the PTX. */
  if (ptx) {
    snprintf(what, sizeof what, "a GPU of sm_%d (newer than all) runs the PTX of compute_%d", ptx + 10, ptx);
    expect(create_on(ptx + 10) == XENT_OK, what);
  }
  /* A major with no cubin below the PTX (sm_110 for the default list): no
     code runs there. */
  for (int cc = 100; cc < ptx; cc += 10) {
    int served = 0;
    for (int j = 0; j < n; ++j) served |= sass[j] / 10 == cc / 10 && sass[j] <= cc;
    if (served) continue;
    snprintf(what, sizeof what, "sm_%d, between the cubins and below the PTX, is refused", cc);
    expect(create_on(cc) == XENT_ERROR_UNSUPPORTED_DEVICE, what);
  }
  fake_cuda.cc[0] = saved[0];
}

/* The ON_CHIP plan on a GPU of compute capability cc that the build runs
   on: taken (the workspace's size answered) where the build's machine code
   has its passes there (sm_90a's on sm_90; sm_100a's on sm_100, sm_100f's
   on sm_100 and sm_103, by xent_cuda_archs.h's flags), else refused as the
   device's, naming the architectures that would serve. (The tests' build
   carries compute_100's PTX alone: sm_100, sm_103 and sm_120 run it, and
   the plan is refused on each; a --config=cuda build takes the rest.) */
static void test_on_chip_device(void) {
  static const int sass[] = XENT_CUDA_SASS_ARCHS, exact[] = XENT_CUDA_SASS_EXACT;
  const int n = (int)(sizeof sass / sizeof sass[0]), saved = fake_cuda.cc[0];
  static const int ccs[] = {90, 100, 103, 120};
  char what[256];
  for (size_t k = 0; k < sizeof ccs / sizeof ccs[0]; ++k) {
    const int cc = ccs[k];
    int served = 0;
    for (int i = 0; i < n; ++i)
      served |= (cc == 90 && sass[i] == 90 && exact[i] == 1) || (cc == 100 && sass[i] == 100 && exact[i] == 1) ||
                (cc / 10 == 10 && sass[i] == 100 && exact[i] == 2);
    fake_cuda.cc[0] = cc;
    xent_handle* h = NULL;
    if (xent_create_on_device(&h, XENT_BACKEND_CUDA, 0) != XENT_OK) {
      xent_destroy(h);
      continue; /* no code of this build runs there (test_device_code) */
    }
    xent_linear_ce_desc d;
    xent_linear_ce_desc_init(&d, 256, 64, 1000, XENT_BF16, XENT_I64, XENT_REDUCTION_MEAN);
    d.plan = XENT_LINEAR_CE_PLAN_ON_CHIP;
    size_t bytes = 0;
    const xent_status s = xent_linear_ce_workspace_size(h, &d, &bytes);
    snprintf(what, sizeof what, "ON_CHIP on sm_%d: %s", cc, served ? "taken" : "refused as the device's");
    expect(served ? s == XENT_OK && bytes > 0
                  : s == XENT_ERROR_UNSUPPORTED_DEVICE && strstr(xent_last_error(), "sm_100f code") != NULL,
           what);
    xent_destroy(h);
  }
  fake_cuda.cc[0] = saved;
}

int main(void) {
  char what[256];
  /* A device every build runs on: the first architecture from sm_90 up
     (the cluster paths below need one), else the PTX's. */
  static const int built[] = XENT_CUDA_SASS_ARCHS;
  int runnable = XENT_CUDA_PTX_ARCH;
  for (int i = (int)(sizeof built / sizeof built[0]) - 1; i >= 0; --i)
    if (built[i] >= 90) runnable = built[i];
  fake_cuda.cc[0] = fake_cuda.cc[1] = runnable;
  test_device_code();
  test_on_chip_device();
  /* A handle on device 1 while device 0 is current. */
  fake_cuda_set_current_device(0);
  xent_handle* h = NULL;
  expect(xent_create_on_device(&h, XENT_BACKEND_CUDA, 1) == XENT_OK, "xent_create_on_device(cuda, 1)");
  if (!h) {
    printf("%s\n", xent_last_error());
    return 1;
  }
  expect(fake_cuda_current_device() == 0, "xent_create_on_device leaves the current device as it was");
  xent_handle* bad = NULL;
  expect(xent_create_on_device(&bad, XENT_BACKEND_CUDA, 2) == XENT_ERROR_INVALID_ARGUMENT &&
             strstr(xent_last_error(), "device 2") != NULL,
         "a device past the count is refused, naming it");

  /* The 48 KiB boundary, on an sm_90 build. */
  int from = fake_cuda.ncalls;
  expect(fused(h, 2, 24576) == XENT_OK, "C = 24576 bf16 (2 blocks of two halves of 24,576 bytes)");
  if (failures) printf("  %s\n", xent_last_error());
  expect(launches_with(from, 49152, 2) == 1, "C = 24576: the on-chip launch of 49,152 bytes, a cluster of 2");
  expect(count(from, FAKE_SET_ATTRIBUTE) == 1, "C = 24576: the on-chip kernel's attribute raised once");
  expect(most_grid_x(from, 49152) == 4, "2 rows: 2 clusters of 2 blocks");
  for (int i = from; i < fake_cuda.ncalls; ++i) {
    const fake_call* c = &fake_cuda.calls[i];
    if (c->kind != FAKE_SET_ATTRIBUTE) continue;
    snprintf(what, sizeof what, "the attribute is the opt-in maximum less the static reserve (%d), not %d",
             fake_cuda.optin[1] - STATIC_RESERVE, c->value);
    expect(c->value == fake_cuda.optin[1] - STATIC_RESERVE, what);
  }
  expect(all_on(from, 1), "every call ran on the handle's device (1), not the current one (0)");
  expect(fake_cuda_current_device() == 0, "the caller's current device is put back");
  from = fake_cuda.ncalls;
  expect(fused(h, 2, 49152) == XENT_OK, "C = 49152 bf16 (4 blocks of 49,152 bytes)");
  expect(launches_with(from, 49152, 4) == 1, "C = 49152: a cluster of 4 blocks of 49,152 bytes");
  expect(count(from, FAKE_SET_ATTRIBUTE) == 0, "no second set of the attribute (once per kernel and device)");
  /* No more clusters than the device holds (the fake: a block an SM, 66
     clusters of 2): 300 rows, each cluster walking its rows in turn. */
  from = fake_cuda.ncalls;
  expect(fused(h, 300, 24576) == XENT_OK && most_grid_x(from, 49152) == 132,
         "300 rows of 24576: the 66 clusters of 2 the device holds");

  /* The class axis in slices (runtime/ops/column_split.c): 8192 positions
     of 1000 classes fill 3% of the fake's 132 SMs of 2048 threads, so the
     strided kernel runs 16 slices of 64 classes (one launch with a grid 16
     blocks high); 4M positions of 21 fill it alone; 1 asks for none. */
  from = fake_cuda.ncalls;
  expect(strided_forward(h, 8, 1000, 1024) == XENT_OK && most_grid_y(from) == 16,
         "[8, 1000, 32, 32]: the strided forward in 16 class slices");
  from = fake_cuda.ncalls;
  expect(strided_forward(h, 16, 21, 512 * 512) == XENT_OK && most_grid_y(from) == 1,
         "[16, 21, 512, 512]: the strided forward in one slice");
  from = fake_cuda.ncalls;
  expect(xent_set_column_slices(h, 1) == XENT_OK && strided_forward(h, 8, 1000, 1024) == XENT_OK &&
             most_grid_y(from) == 1 && xent_set_column_slices(h, 0) == XENT_OK,
         "xent_set_column_slices(1): one slice");

  /* Another thread's (or library's) pending error is not xent's. */
  fake_cuda_set_last_error(cudaErrorInvalidValue);
  expect(fused(h, 2, 1000) == XENT_OK, "a call succeeds with another error pending in the runtime");
  expect(cudaPeekAtLastError() == cudaErrorInvalidValue, "the pending error is left for its owner");
  (void)cudaGetLastError();

  /* xent_check: the reset of the record is waited for. */
  from = fake_cuda.ncalls;
  expect(xent_check(h) == XENT_OK, "xent_check");
  int memset_at = -1, synced_after = 0;
  for (int i = from; i < fake_cuda.ncalls; ++i) {
    if (fake_cuda.calls[i].kind == FAKE_MEMSET) memset_at = i;
    if (memset_at >= 0 && i > memset_at && fake_cuda.calls[i].kind == FAKE_SYNC) synced_after = 1;
  }
  expect(memset_at >= 0, "xent_check resets the record");
  expect(synced_after, "xent_check waits for the reset before returning (a later kernel on another stream could "
                       "otherwise record a bad row the reset erases)");
  expect(all_on(from, 1) && fake_cuda_current_device() == 0, "xent_check runs on the handle's device");

  /* xent_check_stream: read, then reset, in the order of the caller's
     stream, and the host waits for that stream alone. */
  void* const stream = (void*)0x5eed;
  from = fake_cuda.ncalls;
  expect(xent_check_stream(h, stream) == XENT_OK, "xent_check_stream");
  int copy_at = -1, reset_at = -1, wait_at = -1, device_waits = 0, elsewhere = 0;
  for (int i = from; i < fake_cuda.ncalls; ++i) {
    const fake_call* c = &fake_cuda.calls[i];
    if (c->kind == FAKE_MEMCPY_ASYNC && copy_at < 0) copy_at = i;
    if (c->kind == FAKE_MEMSET_ASYNC && reset_at < 0) reset_at = i;
    if (c->kind == FAKE_STREAM_SYNC) wait_at = i;
    device_waits += c->kind == FAKE_SYNC || c->kind == FAKE_MEMSET || c->kind == FAKE_MEMCPY;
    elsewhere += (c->kind == FAKE_MEMCPY_ASYNC || c->kind == FAKE_MEMSET_ASYNC || c->kind == FAKE_STREAM_SYNC) &&
                 c->stream != stream;
  }
  expect(copy_at >= 0 && reset_at > copy_at && wait_at > reset_at,
         "xent_check_stream reads the record, resets it, then waits, all on the stream");
  expect(device_waits == 0 && elsewhere == 0, "xent_check_stream waits for no other stream and not for the device");
  expect(all_on(from, 1) && fake_cuda_current_device() == 0, "xent_check_stream runs on the handle's device");
  expect(xent_check_stream(h, (void*)~(uintptr_t)0) == XENT_ERROR_INVALID_ARGUMENT &&
             strstr(xent_last_error(), "xent_check_stream: stream"),
         "xent_check_stream refuses the backend's all-streams sentinel as a stream");

  /* Code built for compute_80, on device 0 (nothing asked of it yet): no
     clusters, whatever the device has. */
  fake_cuda.ptx_version = 80;
  xent_handle* h0 = NULL;
  expect(xent_create_on_device(&h0, XENT_BACKEND_CUDA, 0) == XENT_OK, "a handle on device 0");
  from = fake_cuda.ncalls;
  expect(h0 && fused(h0, 2, 131072) == XENT_OK && fused(h0, 2, 49152) == XENT_OK,
         "compute_80 code: C = 131072 and 49152");
  int clustered = 0;
  for (int i = from; i < fake_cuda.ncalls; ++i)
    clustered += fake_cuda.calls[i].kind == FAKE_LAUNCH && fake_cuda.calls[i].cluster > 1;
  expect(clustered == 0, "compute_80 code is never launched in clusters");
  /* The table's 64 KiB a block hold two halves of a row of at most 16384
     bf16 classes, and it keeps rows on chip from 16385 on: in one block,
     none. */
  int on_chip = 0;
  for (int i = from; i < fake_cuda.ncalls; ++i)
    on_chip += fake_cuda.calls[i].kind == FAKE_LAUNCH && fake_cuda.calls[i].bytes > 0;
  expect(on_chip == 0, "compute_80 code holds no row on chip (no cluster for two halves of 64 KiB)");

  xent_destroy(h0);
  xent_destroy(h);
  printf("%d passed, %d failed\n", checks - failures, failures);
  return failures ? 1 : 0;
}
