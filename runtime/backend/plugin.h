/* The plugin boundary: a GPU backend built as its own shared library
   (libxent_cuda.so, libxent_hip.so) holding that target's generated kernels,
   its dispatch table and backend_<target>.c, loaded by libxent at
   xent_create (plugin_load.c) instead of linked into it. libxent itself then
   needs neither the CUDA nor the ROCm runtime to load.

   A plugin exports one symbol, xent_plugin_open (plugin_entry.c). libxent
   calls it with what the plugin may call back (its error reporting), and
   gets the plugin's backend table (backend.h). Both sides compare the ABI
   below before anything else: the version, and the sizes of the structures
   that cross the boundary, so that a plugin from another build of xent is
   refused with a status naming the file instead of running on a handle or a
   table it reads differently. */
#ifndef XENT_PLUGIN_H
#define XENT_PLUGIN_H

#include <stdint.h>

#include "runtime/backend/backend.h"
#include "xent_launch.h"

/* Raised whenever backend.h, internal.h's handle, xent_gemm, or the
   generated launch contract (xent_launch.h) or the dispatch table's key
   schema rows change in a way the sizes below would not show. 2: tables
   carry their key schema. 3: xent_ce_args.shard_token_stats (it fills the
   padding after shards: the size does not show it). 4:
   xent_ce_args.wide_labels (padding again). 6: xent_ce_args.column_slices,
   xent_lce_args' ROW_RECORDS fields, the handle's column_slices and
   resident_threads. 7: row_shape.group XENT_ROW_SHAPE_ON_CHIP (the rows on
   chip, asked for), which an older plugin would read as the tables. 8:
   xent_ce_args' label_stride and sum_a_out, xent_lce_args' sum_a and wide.
   9: xent_ce_args.rescale (padding again). 10: xent_lce_args.chip_tcgen05
   (padding again), the handle's on_chip an architecture. (A test builds a
   plugin with another.) */
#ifndef XENT_PLUGIN_ABI_VERSION
#define XENT_PLUGIN_ABI_VERSION 10u
#endif

typedef struct xent_plugin_abi {
  uint32_t version;
  uint32_t handle_bytes;   /* struct xent_handle */
  uint32_t backend_bytes;  /* xent_backend */
  uint32_t entry_bytes;    /* xent_dispatch_entry */
  uint32_t args_bytes;     /* xent_ce_args + xent_softmax_args + xent_lce_args */
  uint32_t gemm_bytes;     /* xent_gemm */
  uint32_t table_bytes;    /* xent_table */
} xent_plugin_abi;

#define XENT_PLUGIN_ABI_INIT                                                                                  \
  {                                                                                                           \
    XENT_PLUGIN_ABI_VERSION, (uint32_t)sizeof(struct xent_handle), (uint32_t)sizeof(xent_backend),            \
        (uint32_t)sizeof(xent_dispatch_entry),                                                                \
        (uint32_t)(sizeof(xent_ce_args) + sizeof(xent_softmax_args) + sizeof(xent_lce_args)),               \
        (uint32_t)sizeof(xent_gemm), (uint32_t)sizeof(xent_table)                                             \
  }

/* What libxent gives a plugin: its ABI, and where the plugin's errors go
   (xent_last_error() of the calling thread, in libxent). */
typedef struct xent_plugin_host {
  xent_plugin_abi abi;
  xent_status (*fail)(xent_status status, const char* message);
} xent_plugin_host;

/* What a plugin gives back. */
typedef struct xent_plugin {
  xent_plugin_abi abi;
  const xent_backend* backend;
} xent_plugin;

/* The one symbol a plugin exports. It always returns its descriptor, and
   keeps host (for its errors) only where host's ABI is its own; libxent
   compares the two ABIs and refuses the plugin where they differ. */
#define XENT_PLUGIN_ENTRY "xent_plugin_open"
typedef const xent_plugin* (*xent_plugin_open_fn)(const xent_plugin_host* host);

/* libxent's side (plugin_load.c): the backend of `kind` (cuda or hip) from
   its plugin, found on XENT_PLUGIN_PATH (directories separated by ':') or
   beside the library (or program) libxent is linked into, loaded once per
   process. XENT_ERROR_BACKEND_UNAVAILABLE naming the file and why: not
   found (and where it looked), not loadable (the loader's reason, e.g. a
   missing libcudart), or built for another ABI. */
xent_status xent_plugin_backend(xent_backend_kind kind, const xent_backend** out);

/* The plugin file of a backend kind: "libxent_cuda.so", "libxent_hip.so". */
const char* xent_plugin_file(xent_backend_kind kind);

#endif
