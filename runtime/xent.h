/* xent: fused softmax cross-entropy kernels, generated from specs/.
 *
 * A handle picks a backend (a CUDA or HIP GPU, or the CPU); a descriptor
 * says what to compute; the calls take device pointers (host pointers on the
 * CPU backend) and an opaque stream. Nothing inside a call synchronises with
 * the host, and every size and offset is 64-bit.
 *
 *   xent_handle* h;
 *   xent_create(&h, XENT_BACKEND_AUTO);
 *   xent_ce_desc d;
 *   xent_ce_desc_init(&d, rows, classes, XENT_BF16, XENT_I64, XENT_REDUCTION_MEAN);
 *   size_t ws_bytes;
 *   xent_ce_workspace_size(h, &d, XENT_OP_FORWARD_BACKWARD, &ws_bytes);
 *   xent_ce_forward_backward(h, &d, logits, labels, NULL, NULL, loss, lse, grad, ws, ws_bytes, stream);
 *
 * Every option and extra tensor goes through xent_ce_run() and a
 * xent_ce_tensors struct; xent_ce_forward/backward/forward_backward are
 * shorthands for the common case. Semantics are PyTorch's F.cross_entropy
 * (docs/API.md, "Semantics"). Errors are status codes; xent_last_error() holds a
 * message naming the argument at fault (per thread).
 *
 * Buffers: every pointer is aligned to its element (4 bytes for f32 logits,
 * 8 for int64 labels, ...; the workspace to 8 bytes), or the call returns
 * XENT_ERROR_INVALID_ARGUMENT naming it. No buffer a call writes may overlap
 * another buffer of that call, save grad == logits (in place) for the
 * forward_backward op; the call names the pair that does.
 *
 * Threads: every call may run on any thread at once, on one handle each or
 * on one shared handle (the handle is read-only after xent_create but for
 * its bad-label record, which kernels update atomically, and error
 * messages are per thread). A shared handle shares that record: xent_check
 * reports the lowest bad row of any call since the last check. Work on one
 * stream is ordered as the caller enqueues it, as for any GPU library.
 * xent_destroy must not race with other calls on the same handle, and a
 * destroyed handle must not be used again (it is freed).
 */
#ifndef XENT_H
#define XENT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum xent_status {
  XENT_OK = 0,
  XENT_ERROR_INVALID_ARGUMENT = 1,   /* a NULL pointer, a bad size or enum value */
  XENT_ERROR_NOT_GENERATED = 2,      /* no kernel for this variant: edit the spec */
  XENT_ERROR_UNSUPPORTED_DEVICE = 3, /* the kernel needs a newer GPU architecture */
  XENT_ERROR_BACKEND_UNAVAILABLE = 4,/* backend not built in, or no device present */
  XENT_ERROR_WORKSPACE_TOO_SMALL = 5,
  XENT_ERROR_DEVICE = 6,             /* the GPU runtime reported an error */
  XENT_ERROR_OUT_OF_MEMORY = 7,
  XENT_ERROR_INVALID_LABEL = 8,      /* xent_check(): a label was outside [0, classes) */
  XENT_ERROR_COLLECTIVE = 9,         /* vocabulary-parallel: the all-gather failed, or NCCL/RCCL is absent */
  XENT_ERROR_BLAS = 10               /* fused linear cross entropy: the BLAS library is absent or failed */
} xent_status;

typedef enum xent_dtype { XENT_F32 = 0, XENT_F16 = 1, XENT_BF16 = 2, XENT_F64 = 3 } xent_dtype;

typedef enum xent_label_type {
  XENT_I32 = 0,  /* hard labels, int32 [rows] */
  XENT_I64 = 1,  /* hard labels, int64 [rows] */
  XENT_PROB = 2  /* soft labels: a distribution per row, laid out and typed like the logits */
} xent_label_type;

typedef enum xent_reduction {
  XENT_REDUCTION_NONE = 0, /* loss[N] */
  XENT_REDUCTION_SUM = 1,  /* loss[1] = sum of row losses */
  XENT_REDUCTION_MEAN = 2  /* loss[1] = sum of row losses / sum of w[label] over non-ignored rows */
} xent_reduction;

typedef enum xent_op {
  XENT_OP_FORWARD = 0,
  XENT_OP_BACKWARD = 1,
  XENT_OP_FORWARD_BACKWARD = 2
} xent_op;

typedef enum xent_backend_kind {
  XENT_BACKEND_AUTO = 0, /* a GPU backend that was built in and has a device, else the CPU */
  XENT_BACKEND_CPU = 1,  /* host memory, no GPU needed */
  XENT_BACKEND_CUDA = 2,
  XENT_BACKEND_HIP = 3
} xent_backend_kind;

/* What a label outside [0, classes) that is not ignore_index does. Either
   way it is never used as an index. */
typedef enum xent_invalid_labels {
  XENT_INVALID_LABELS_REPORT = 0, /* its row is NaN; xent_check() names the first such row */
  XENT_INVALID_LABELS_IGNORE = 1  /* the row counts as ignored */
} xent_invalid_labels;

/* What a mean divides by when the call has token weights
   (xent_ce_tensors.token_weight; docs/API.md, "Token weights"). */
typedef enum xent_token_weight_mean {
  XENT_TOKEN_WEIGHT_MEAN_WEIGHTS = 0, /* sum over counted rows of w[y] * token_weight[n] (PyTorch's weighted
                                         mean with the token weight in each row's weight; soft labels: the sum
                                         of token weights): a 0/1 mask is verl's "token-mean" */
  XENT_TOKEN_WEIGHT_MEAN_COUNT = 1    /* what it is without token weights (sum over counted rows of w[y]; soft
                                         labels: the row count): for signed weights such as advantages */
} xent_token_weight_mean;

/* ignore_index value that matches no label (ONNX: ignore_index absent). */
#define XENT_NO_IGNORE_INDEX INT64_MIN

/* Vocabulary parallelism (Megatron-style tensor parallelism of the output
   layer): the class axis is split over `ranks` devices, and this rank holds
   classes [class_offset, class_offset + desc->classes) of global_classes.
   Every rank makes the same call on its slice, with the same labels (global
   class numbers), weights ([global_classes]) and options; each gets the loss
   and lse of the whole vocabulary and the gradient of its own slice, with
   smoothing spread over global_classes (Megatron uses the local count).
   Each call runs one collective: an all-gather of 4 accumulation-type values
   per row (16 bytes in f32), none for a hard-label backward from the saved
   lse. Loss, lse and gradient are shift-invariant as on one device, with one
   exception: a hard-label backward from the saved lse has that lse's
   precision, |lse| ulps of each probability (a single device takes the
   statistics of such a row again from its logits; a slice cannot). Where
   |lse| may exceed 64 (f32) and that matters, use XENT_OP_FORWARD_BACKWARD. The collective is the caller's: NCCL or RCCL
   through xent_vocab_shard_nccl(), or any function of this type. It gathers
   `bytes` from every rank into recv, rank by rank; send is recv + rank *
   bytes (in place, as ncclAllGather allows). It is enqueued on `stream`
   like the kernels (no host synchronisation) and returns 0 on success. */
typedef int (*xent_all_gather_fn)(void* ctx, const void* send, void* recv, size_t bytes, void* stream);

typedef struct xent_vocab_shard {
  int64_t class_offset;    /* this rank's first class, >= 0 */
  int64_t global_classes;  /* the whole vocabulary, >= class_offset + desc->classes */
  int rank;                /* in [0, ranks): where this rank's statistics go in the gather */
  int ranks;               /* >= 1 */
  xent_all_gather_fn all_gather;
  void* ctx;               /* passed to all_gather */
  /* For a framework whose collective is in its own graph (JAX's all_gather
     under shard_map): the call in two halves around it. xent_ce_shard_records
     writes this rank's records; the framework gathers every rank's, rank by
     rank; the call with `gathered` set then skips its first pass and the
     all_gather (which may be NULL). */
  const void* gathered;    /* NULL, or [ranks][xent_ce_shard_records_size bytes], as gathered */
  const int64_t* class_offset_at; /* NULL, or where the device reads class_offset (a value the framework
                                     computes on the device, as JAX's axis_index): then class_offset is 0
                                     and the slices are global_classes / ranks classes each */
} xent_vocab_shard;

/* Shapes. The logits are [outer, C, inner] in memory: the class axis has
   stride `inner`, and a "row" is one position (o, i), rows = outer * inner.
   [N, C] is inner = 1; PyTorch/ONNX [N, C, d1..dk] is inner = d1*...*dk;
   Paddle's `axis` is inner = the product of the dims after it
   (xent_ce_desc_init_nd computes all three). Labels, per-row losses and lse
   are [rows] in (o, i) order, which is the labels' natural [N, d1..dk]
   layout; soft labels, grad, log_prob and softmax share the logits' layout.
   Nothing is transposed. */
typedef struct xent_ce_desc {
  int64_t rows;            /* positions, >= 0 */
  int64_t classes;         /* C >= 1 */
  int64_t inner;           /* stride of the class axis, >= 1 (1 = class axis last); divides rows */
  xent_dtype dtype;        /* logits (and soft labels, log_prob, softmax); weights and lse use f32 (f64 for XENT_F64) */
  xent_dtype loss_dtype;   /* loss and dloss: dtype, or XENT_F32 for f16/bf16 logits (mixed precision) */
  xent_dtype grad_dtype;   /* grad and grad_bias: dtype, or XENT_F32 for f16/bf16 logits */
  xent_label_type label_type;
  xent_reduction reduction;
  int64_t ignore_index;    /* hard labels: default -100 (PyTorch); any value, or XENT_NO_IGNORE_INDEX */
  double label_smoothing;  /* epsilon in [0, 1], default 0 */
  int all_ignored_zero;    /* mean over no (weighted) rows: 0 if set (ONNX Runtime), NaN if not (PyTorch, default) */
  double z_loss;           /* z >= 0: each counted row adds z * lse^2 (Liger's lse_square_scale); 0 = off */
  double softcap;          /* cap > 0: logits -> cap * tanh(logits / cap) first (Gemma-2); 0 = off */
  xent_invalid_labels invalid_labels; /* default XENT_INVALID_LABELS_REPORT */
  const xent_vocab_shard* vocab_shard; /* NULL (default): the whole vocabulary is on this device */
  double temperature;      /* tau > 0, default 1: the logits (after the soft cap) are divided by it before
                              everything else; every output is of the scaled logits z, every gradient is
                              with respect to the unscaled logits (docs/API.md, "Semantics"); a call with
                              tensors->temperature takes each row's from there instead */
  xent_token_weight_mean token_weight_mean; /* the mean's divisor with tensors->token_weight; default
                                               XENT_TOKEN_WEIGHT_MEAN_WEIGHTS */
} xent_ce_desc;

/* PyTorch's defaults: class axis last (inner = 1), loss and grad in the
   logits dtype, ignore_index -100, no smoothing, NaN for an all-ignored mean,
   temperature 1. */
void xent_ce_desc_init(xent_ce_desc* desc, int64_t rows, int64_t classes, xent_dtype dtype,
                       xent_label_type label_type, xent_reduction reduction);

/* The same for logits of shape shape[0..ndim) with the class axis at `axis`
   (negative counts from the end, as in Paddle and PyTorch): classes =
   shape[axis], inner = the product after it, rows = the product of the
   others. Returns XENT_ERROR_INVALID_ARGUMENT (naming it) for a bad shape. */
xent_status xent_ce_desc_init_nd(xent_ce_desc* desc, int ndim, const int64_t* shape, int axis, xent_dtype dtype,
                                 xent_label_type label_type, xent_reduction reduction);

/* The tensors of one call. Pointers are device memory (host memory on the
   cpu backend); which are read or written depends on the op, the rest are
   ignored. Zero-initialise and fill in what the call needs. */
typedef struct xent_ce_tensors {
  const void* logits;     /* in, every op: [rows, C] (layout above), dtype */
  const void* labels;     /* in, every op: hard [rows] int32/int64; XENT_PROB: like logits */
  const void* weights;    /* in, optional: class weights [C], accumulation type */
  const void* lse_in;     /* in, backward: the lse saved by forward */
  const void* dloss;      /* in, backward ops, optional (NULL = 1): [rows] for 'none', else [1], loss_dtype */
  const void* grad_bias;  /* in, backward ops, optional: [rows, C] in grad_dtype, added to grad (ONNX Runtime) */
  void* loss;             /* out, forward ops: [rows] for 'none', else [1], loss_dtype */
  void* lse;              /* out, forward ops, optional: [rows] per-row log-sum-exp, accumulation type */
  void* log_prob;         /* out, forward ops, optional: [rows, C] log-softmax, dtype (ONNX log_prob) */
  void* softmax;          /* out, forward ops, optional: [rows, C] softmax, dtype (Paddle return_softmax) */
  void* grad;             /* out, backward ops: [rows, C] in grad_dtype; may equal logits for the
                             forward_backward op when grad_dtype == dtype (in place, opt-in) */
  void* grad_labels;      /* out, backward ops, XENT_PROB only, optional: d loss / d labels, like labels */
  /* Per-token outputs for RL and LLM trainers (docs/API.md, "Per-token outputs"),
     computed in the pass that reads the row; a spec decides which kernels
     carry them (axis token_stats). With z the scaled logits and lse theirs: */
  void* entropy;          /* out, forward ops, optional: [rows] H = lse - sum_c p_c z_c, accumulation type;
                             0 for an ignored row */
  void* label_logprob;    /* out, forward ops, hard labels, optional: [rows] z_y - lse, accumulation type;
                             0 for an ignored row (with weights or smoothing, not -loss) */
  int64_t* argmax;        /* out, forward ops, hard labels, optional: [rows] the first index of the row's
                             largest z, or of its first NaN (torch.argmax), for every row */
  const void* dentropy;   /* in, backward ops, optional: [rows] d objective / d entropy, accumulation type:
                             adds dentropy_n * p_j * (E_p[z] - z_j) (per unscaled logit: times dz/dx) to
                             the gradient, in the same pass (none for an ignored row) */
  /* Per row (RL trainers: a sampling temperature per sequence, a loss weight per token). */
  const void* temperature; /* in, optional: [rows] tau of each row, accumulation type, in place of
                              desc->temperature (which must then be 1). A tau that is not finite and > 0
                              makes its row NaN (loss, lse, outputs, gradient) and is reported like a bad
                              label: xent_check() names the first such row */
  const void* token_weight; /* in, optional: [rows] accumulation type: multiplies the row's loss (z-loss
                               included) and that loss's gradient; 0 gives 0 whatever the row holds (a bad
                               label's row stays NaN). The per-token outputs and the entropy's gradient
                               are not weighted. The mean's divisor: desc->token_weight_mean */
} xent_ce_tensors;

typedef struct xent_handle xent_handle;

xent_status xent_create(xent_handle** handle, xent_backend_kind kind);
/* The same on GPU `device` (the backend runtime's ordinal; -1: the calling
   thread's current device, which is what xent_create takes). Every call on
   the handle runs on its device whatever is current, and leaves the
   caller's current device as it found it. The cpu backend ignores it. */
xent_status xent_create_on_device(xent_handle** handle, xent_backend_kind kind, int device);
void xent_destroy(xent_handle* handle);
/* The backend a handle runs on (never XENT_BACKEND_AUTO). */
xent_backend_kind xent_handle_backend(const xent_handle* handle);
const char* xent_backend_name(xent_backend_kind kind);

/* What a cpu handle runs. XENT_BACKEND_CPU (the default): its own host
   code for the cross entropy and the softmax family, vectorized and
   threaded over rows (OMP_NUM_THREADS caps the threads); the fused linear
   cross entropy's steps and the vocabulary-parallel stages run the CUDA
   rendering under the emulator. XENT_BACKEND_CUDA or XENT_BACKEND_HIP: every
   call runs the generated GPU kernels of that rendering under the SIMT
   emulator (32-lane warps, or 64-lane wavefronts), as the tests do, with
   xent_set_row_shape's launch shapes. Either way the variants are the
   generated ones: a call no spec generates is XENT_ERROR_NOT_GENERATED.
   The environment variable XENT_CPU_EMULATE=cuda or hip sets the rendering
   of every cpu handle xent_create makes from then on (for a program that
   makes its own handles, as the PyTorch package does). */
xent_status xent_cpu_emulate(xent_handle* handle, xent_backend_kind target);

/* For tuning (bench/bench.py's `tune` group, docs/PERFORMANCE.md "Launch
   shapes"): every row kernel this handle launches on contiguous rows (the
   cross entropy's, the fused linear cross entropy's and the softmax's)
   runs in blocks of block_threads threads, threads_per_row of them a row (a
   power of two up to the warp: several rows a block, reduced with
   shuffles; 0: a row a block), instead of the shape its spec's tune table
   picks by C; the fused kernels then hold no row on chip. Strided rows
   keep their shape. 0, 0 restores the tables. block_threads is a power of
   two from 32 to 1024, threads_per_row 0 or a power of two up to 64 (else
   XENT_ERROR_INVALID_ARGUMENT). What depends on the kernel is checked at
   each launch, as a GPU would: a block larger than the kernel's largest
   tuned block (its launch bounds; on CUDA 512 for most row kernels, 256
   for f64 and the softmax forward), a block that is not whole warps (32 lanes; 64 on HIP) or more threads a
   row than a warp make the call fail with XENT_ERROR_DEVICE, naming the
   kernel. Set it between calls, not while another thread calls on the
   handle.
   XENT_ROW_SHAPE_ON_CHIP, 0 asks instead for the rows held on chip
   (docs/PERFORMANCE.md, "Rows on chip") wherever a kernel's table has an
   on-chip shape for C that fits the device, whatever the row count; a call
   of a kernel, class count or device without one fails with
   XENT_ERROR_DEVICE, naming the kernel. */
#define XENT_ROW_SHAPE_ON_CHIP (-1)
xent_status xent_set_row_shape(xent_handle* handle, int threads_per_row, int block_threads);

/* For tuning and tests: how many slices a cross entropy whose class axis is
   strided (desc->inner > 1) cuts that axis into, each slice run by its own
   threads in one launch as a vocabulary-parallel call runs its ranks
   (docs/PERFORMANCE.md, "The class axis in slices"). 0 (the default): the
   runtime's choice on a GPU (slices where the rows alone would leave the
   device's threads idle), none on the cpu backend's own code; 1: never;
   2 to 64: that many (fewer where C is small: slices of ceil(C / slices)
   classes). A call's workspace grows with its slices (xent_ce_workspace_size
   asks the handle: set this first). Vocabulary-parallel calls and calls
   with log_prob or softmax outputs keep one slice. A count outside 0 to 64
   is XENT_ERROR_INVALID_ARGUMENT. Set it between calls, as
   xent_set_row_shape. */
xent_status xent_set_column_slices(xent_handle* handle, int slices);

/* The kernels a handle can run: the variant keys of its backend's dispatch
   table (the cpu backend: of the rendering it emulates), sorted, e.g.
   "ce_fwd_bf16_i64_mean". A library built from your own specs
   (docs/INTEGRATION.md, "Using xent in your project") lists exactly their variants. */
xent_status xent_kernel_count(const xent_handle* handle, size_t* count);
/* *key: the index-th key, valid as long as the library is loaded. */
xent_status xent_kernel_key(const xent_handle* handle, size_t index, const char** key);

/* Bytes of scratch device memory a call needs (0 is possible). The
   workspace holds O(rows) values, never O(rows * classes) (a vocabulary-
   parallel call: O(rows * ranks), the gathered statistics; a strided call
   cut into slices, O(rows * slices): xent_set_column_slices). */
xent_status xent_ce_workspace_size(const xent_handle* handle, const xent_ce_desc* desc, xent_op op,
                                   size_t* bytes);

/* One call of any op with every option (see xent_ce_tensors). */
xent_status xent_ce_run(xent_handle* handle, const xent_ce_desc* desc, xent_op op, const xent_ce_tensors* tensors,
                        void* workspace, size_t workspace_bytes, void* stream);

/* Shorthands for xent_ce_run. Forward: logits, labels, weights (or NULL),
   loss, lse (or NULL): the per-row log-sum-exp that backward takes. */
xent_status xent_ce_forward(xent_handle* handle, const xent_ce_desc* desc, const void* logits,
                            const void* labels, const void* weights, void* loss, void* lse, void* workspace,
                            size_t workspace_bytes, void* stream);

/* Backward from the saved lse. dloss: [rows] for 'none', else [1], or NULL
   for 1. grad must not overlap logits. */
xent_status xent_ce_backward(xent_handle* handle, const xent_ce_desc* desc, const void* logits,
                             const void* labels, const void* weights, const void* lse, const void* dloss,
                             void* grad, void* workspace, size_t workspace_bytes, void* stream);

/* Loss and gradient in one pass. loss and lse as in forward (lse may be
   NULL); dloss as in backward. grad may equal logits (in place: the logits
   are overwritten by their gradient); any other overlap is an error. */
xent_status xent_ce_forward_backward(xent_handle* handle, const xent_ce_desc* desc, const void* logits,
                                     const void* labels, const void* weights, const void* dloss, void* loss,
                                     void* lse, void* grad, void* workspace, size_t workspace_bytes,
                                     void* stream);

/* The backward of a forward_backward call made ahead of time with dloss
   NULL (= 1), as PyTorch's inplace_backward (Liger-Kernel's in-place mode)
   makes it: grad, as that call wrote it (in place over the logits or not;
   desc->grad_dtype, desc's layout), *= dloss ([rows] for 'none', else [1],
   desc->loss_dtype), in the accumulation type. Elements whose factor is
   exactly 1 are neither read nor written, as the device decides: no host
   synchronization, and a dloss of 1 (the usual loss.backward()) costs one
   small launch. dloss NULL: nothing to do. desc: the forward_backward
   call's (a vocabulary-parallel slice's grad is the slice's). */
xent_status xent_ce_scale_grad(xent_handle* handle, const xent_ce_desc* desc, const void* dloss, void* grad,
                               void* stream);

/* Fills shard's collective with NCCL's ncclAllGather (CUDA handles) or
   RCCL's (HIP handles) on the caller's communicator `comm` (an ncclComm_t),
   and rank and ranks from it. The library is loaded at run time
   (libnccl.so.2, librccl.so.1), so xent neither links nor needs it
   otherwise; XENT_ERROR_COLLECTIVE if it cannot be loaded. */
xent_status xent_vocab_shard_nccl(const xent_handle* handle, xent_vocab_shard* shard, void* comm,
                                  int64_t class_offset, int64_t global_classes);

/* The first half of a vocabulary-parallel call (xent_vocab_shard's
   `gathered`): this rank's statistics of every row, `*bytes` of them
   (xent_ce_shard_records_size), into `records`, enqueued on `stream`. Then
   the caller gathers every rank's records, rank by rank, and makes the same
   call with desc->vocab_shard->gathered pointing at them. desc, op and
   tensors are that call's (the records are wider where it has per-token
   outputs); the workspace is xent_ce_workspace_size's. */
xent_status xent_ce_shard_records_size(const xent_handle* handle, const xent_ce_desc* desc, xent_op op,
                                       const xent_ce_tensors* tensors, size_t* bytes);
xent_status xent_ce_shard_records(xent_handle* handle, const xent_ce_desc* desc, xent_op op,
                                  const xent_ce_tensors* tensors, void* records, void* workspace,
                                  size_t workspace_bytes, void* stream);

/* The softmax family (ONNX Runtime Softmax/LogSoftmax and their gradients
   SoftmaxGrad/LogSoftmaxGrad, opset 13: any axis), on the same strided
   layout: x is [outer, classes, inner], rows = outer * inner. */
typedef enum xent_softmax_kind { XENT_SOFTMAX = 0, XENT_LOG_SOFTMAX = 1 } xent_softmax_kind;

typedef struct xent_softmax_desc {
  int64_t rows;      /* positions: outer * inner */
  int64_t classes;   /* the softmax axis, >= 1 */
  int64_t inner;     /* stride of the softmax axis, >= 1; divides rows */
  xent_dtype dtype;  /* x, y, dy, dx (f16/bf16 accumulate in f32) */
  xent_softmax_kind kind;
} xent_softmax_desc;

/* shape[0..ndim) with the softmax axis at `axis` (negative from the end). */
xent_status xent_softmax_desc_init_nd(xent_softmax_desc* desc, int ndim, const int64_t* shape, int axis,
                                      xent_dtype dtype, xent_softmax_kind kind);

/* y = softmax(x) or log_softmax(x) along the axis. y may equal x. */
xent_status xent_softmax_forward(xent_handle* handle, const xent_softmax_desc* desc, const void* x, void* y,
                                 void* stream);

/* From the forward's output y and the upstream dy: softmax: dx = y * (dy -
   sum(dy * y)); log_softmax: dx = dy - exp(y) * sum(dy), sums along the axis.
   dx may equal dy. */
xent_status xent_softmax_backward(xent_handle* handle, const xent_softmax_desc* desc, const void* y, const void* dy,
                                  void* dx, void* stream);

/* Fused linear + cross entropy: the loss of a language model's output layer,
   logits = hidden @ weight^T (+ bias), and the gradients of hidden, weight
   and bias in the same call, without the [rows, classes] logits ever
   existing whole. Rows are taken chunk_rows at a time: the chunk's logits by
   a GEMM, the fused cross-entropy kernel over them in place (its gradient
   replaces them), then the two gradient GEMMs. Every option of the loss is
   desc->ce's, with its semantics; reductions are deterministic (the chunks
   in order; a mean's divisor is counted from the labels before the first
   chunk, so every chunk's gradient is scaled once). The steps around the
   GEMMs and the fused kernel (the divisor, the bias and its gradient, the
   loss from the chunks' sums) are generated kernels of family
   linear_cross_entropy, run on the call's stream.
   The GEMMs: on the cpu backend OpenBLAS, loaded at run time
   (libopenblas.so.0; XENT_ERROR_BLAS if absent); on CUDA cuBLASLt and on
   HIP hipBLASLt (ROCm 6.0 or later), each loaded at run time
   (XENT_ERROR_BLAS if absent or failing, with the library's status). The
   chunk's gradient of the logits is in their dtype; the gradient GEMMs
   write grad_hidden and grad_weight in grad_dtype (f32 from f16/bf16
   operands where it says so), and grad_weight and grad_bias are summed over
   the chunks in f32 and rounded once. */
typedef struct xent_linear_ce_desc {
  xent_ce_desc ce;   /* the loss: rows N, classes V, inner 1, dtype (of hidden, weight and bias), loss_dtype,
                        grad_dtype (of every gradient), labels and every option; a vocab_shard splits weight's
                        rows over ranks (each rank's grad_hidden is then its slice's share: sum it over ranks) */
  int64_t hidden;    /* H >= 1 */
  int64_t chunk_rows;/* rows per chunk, >= 0; 0: the default, the spec's tune data for the
                        target (specs/linear_cross_entropy.lua: the most rows, a power of two,
                        whose logits over the whole vocabulary fit in chunk_mib MiB), at most N */
  int accumulate;    /* grad_weight (or main_grad) and grad_bias: 0 overwrites them, 1 adds to them */
  int main_grad;     /* 1: the weight's gradient goes to tensors->main_grad, f32, in place of grad_weight
                        (Megatron-LM's main_grad): summed there over the chunks, never rounded, and no
                        O(V * H) workspace; f32, f16 and bf16 only */
  int64_t chunk_classes; /* a tiled plan's classes per tile, >= 0 (0: the largest square tiles that fit,
                            chunk_rows rows, or as many as classes) */
  int64_t memory_mib;    /* the workspace the call may take, in MiB, >= 0; 0: XENT_LINEAR_CE_MEMORY_MIB */
  int plan;              /* xent_linear_ce_plan_kind: XENT_LINEAR_CE_PLAN_AUTO (0) picks by memory_mib */
} xent_linear_ce_desc;

/* How a fused linear cross entropy makes its logits (docs/LINEAR_CE.md):
   - ONE_PASS (3 GEMMs): chunk_rows rows at a time, each chunk's logits over
     the whole vocabulary (chunk_rows * V), and for an f16/bf16 grad_weight
     over several chunks its f32 sum (V * H * 4 bytes: 2 GiB at V = 128K,
     H = 4096);
   - TILED_HIDDEN_SUM (4 GEMMs): tiles of rows x classes; each tile's logits
     made once for the rows' statistics, then again for all three gradients:
     grad_weight and grad_bias summed over the rows in f32 (classes * H * 4),
     grad_hidden over the tiles in f32 for every row (N * H * 4: 256 MiB at
     N = 16384, H = 4096);
   - TILED (5 GEMMs): as TILED_HIDDEN_SUM, but grad_hidden's tiles made in a
     sweep of their own, chunk by chunk (chunk_rows * H * 4): a workspace
     that grows with neither the rows nor V * H (the rows' lse and entropy,
     8 bytes a row, and V's tile records aside).
   AUTO takes the first that fits memory_mib: ONE_PASS, TILED_HIDDEN_SUM
   with tiles of at least 2048 x 2048, TILED with the largest square tiles
   that fit (at least 128 x 128). Every plan takes every logits dtype, hard
   or soft labels. f32 and f64 gradients (the logits' dtype, or grad_dtype)
   and a main_grad are their own sums in every plan: nothing of theirs is
   kept in the workspace or rounded (the sums in f32 of "f32" above are of
   f16/bf16 gradients). With dentropy, the sweep from the rows' lse
   also reads their entropy (the call's, or the workspace's); with soft
   labels, each row's sum of w[c] * t'_c (the workspace's, 4 bytes a row).
   - ON_CHIP (no GEMM; asked for, never AUTO's until a GPU has measured
     it): the tensor cores make each 64 x 128 tile of logits in registers
     (kernels/linear_cross_entropy/on_chip.h), twice: once for the rows'
     statistics, once for G and its two products, summed by atomics (in no
     fixed order) into f32 sums of grad_hidden (every row's if it fits
     memory_mib, else chunk_rows at a time in a sweep of their own) and of
     grad_weight (chunk_classes at a time), rounded once. An sm_90 GPU with
     the kernels' sm_90a code (--define=xent_cuda_archs=...,90a,...), an
     sm_100 or sm_103 GPU with their sm_100f code (...,100f,...: tcgen05
     tiles of 128 x 256 in tensor memory, on_chip_sm100.h; sm_100a's code
     serves sm_100 alone; no such GPU has run them yet), or the emulated
     CUDA rendering; bf16 hidden and weight, hard labels (class
     weights, ignore_index, label smoothing, z-loss, the soft cap, the
     temperature, the call's or each row's, token weights, a bias, the
     per-token outputs with dentropy, and the vocabulary split over ranks
     (each rank's records all-gathered, as the tiled plans') too). */
typedef enum xent_linear_ce_plan_kind {
  XENT_LINEAR_CE_PLAN_AUTO = 0,
  XENT_LINEAR_CE_PLAN_ONE_PASS = 1,
  XENT_LINEAR_CE_PLAN_TILED_HIDDEN_SUM = 2,
  XENT_LINEAR_CE_PLAN_TILED = 3,
  XENT_LINEAR_CE_PLAN_ON_CHIP = 4
} xent_linear_ce_plan_kind;
/* The default bound on the workspace. */
#define XENT_LINEAR_CE_MEMORY_MIB 64

/* desc->ce as xent_ce_desc_init, hidden H, chunk_rows 0, accumulate 0, main_grad 0, chunk_classes 0,
   memory_mib 0, plan AUTO. */
void xent_linear_ce_desc_init(xent_linear_ce_desc* desc, int64_t rows, int64_t hidden, int64_t classes,
                              xent_dtype dtype, xent_label_type label_type, xent_reduction reduction);

typedef struct xent_linear_ce_tensors {
  const void* hidden;   /* in: [rows, H], dtype, row-major */
  const void* weight;   /* in: [V, H], dtype */
  const void* bias;     /* in, optional: [V], dtype */
  const void* labels;   /* in: hard [rows] int32/int64; XENT_PROB: [rows, V], dtype */
  const void* weights;  /* in, optional: class weights, as xent_ce_tensors.weights */
  const void* dloss;    /* in, optional (NULL = 1): [rows] for 'none', else [1], loss_dtype */
  void* loss;           /* out: [rows] for 'none', else [1], loss_dtype */
  void* lse;            /* out, optional: [rows], accumulation type */
  void* grad_hidden;    /* out, optional: [rows, H], grad_dtype */
  void* grad_weight;    /* out, optional: [V, H], grad_dtype */
  void* grad_bias;      /* out, optional (needs bias): [V], grad_dtype */
  /* The per-token outputs of xent_ce_tensors (docs/API.md, "Per-token outputs"),
     of z = the capped logits / desc->ce.temperature, each computed in its
     chunk's fused pass: */
  void* entropy;        /* out, optional: [rows], accumulation type */
  void* label_logprob;  /* out, optional, hard labels: [rows] z_y - lse, accumulation type */
  int64_t* argmax;      /* out, optional, hard labels: [rows] */
  const void* dentropy; /* in, optional: [rows], accumulation type: d objective / d entropy, whose term
                           joins the gradients of hidden, weight and bias */
  const void* temperature;  /* in, optional: [rows] each row's tau, accumulation type (xent_ce_tensors) */
  const void* token_weight; /* in, optional: [rows] each row's loss weight, accumulation type: it reaches
                               grad_hidden, grad_weight and grad_bias through the logits' gradient */
  void* main_grad;      /* out, with desc->main_grad (else NULL): [V, H] f32, the weight's gradient written
                           or (desc->accumulate) added to; grad_weight is then NULL */
} xent_linear_ce_tensors;

/* Bytes of scratch memory a call needs, by its plan (above). One pass: a
   chunk's logits (chunk_rows * V); on a GPU the GEMM library's workspace
   (32 MiB; the cpu backend's GEMM allocates its own f32 copies of f16/bf16
   operands, a block at a time, outside it); V accumulation-type values,
   the cross-entropy call's own workspace, and the chunk loop's steps' (8 KiB
   of partial sums, two values per chunk): never O(rows * V). One O(V * H):
   an f16/bf16 grad_weight over more than one chunk is summed in f32 here
   (V * H * 4 bytes; none where grad_dtype is f32, grad_weight being that
   sum, or with desc->main_grad, main_grad being it), so that it is rounded
   once rather than at every chunk. Tiled: a tile's logits, the f32 sums
   (above), every tile's statistics for a chunk of rows (V / tile classes
   records), the rows' lse, the GEMM library's workspace (at most 4 MiB,
   and a sixteenth of the budget) and the steps' and cross-entropy calls'. */
xent_status xent_linear_ce_workspace_size(const xent_handle* handle, const xent_linear_ce_desc* desc,
                                          size_t* bytes);

xent_status xent_linear_ce_run(xent_handle* handle, const xent_linear_ce_desc* desc,
                               const xent_linear_ce_tensors* tensors, void* workspace, size_t workspace_bytes,
                               void* stream);

/* Waits for the handle's device and reports labels outside [0, classes)
   seen by any call since the last check: XENT_ERROR_INVALID_LABEL, with the
   lowest such row in xent_last_error() (PyTorch raises a device-side assert;
   TensorFlow silently returns NaN). Clears the record. The only call that
   synchronises with the host. */
xent_status xent_check(xent_handle* handle);

/* xent_check in stream order: waits only for the work enqueued on `stream`
   (as xent_ce_run's stream argument; NULL is the default stream), not for
   the whole device, so that a trainer checking after its loss does not wait
   for its collectives on other streams. The record is read and cleared on
   that stream: a bad row recorded meanwhile by a call on another stream may
   be cleared unreported, so a program whose xent calls run on several
   streams checks each of them after its last call, or calls xent_check. */
xent_status xent_check_stream(xent_handle* handle, void* stream);

const char* xent_status_string(xent_status status);
/* The message of the last failed call on this thread ("" if none). */
const char* xent_last_error(void);

#ifdef __cplusplus
}
#endif

#endif
