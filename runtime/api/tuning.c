/* The handle's launch settings for tuning and tests.
   xent_set_row_shape (xent.h): a handle's launch shape for contiguous rows,
   chosen by the caller instead of the specs' tune tables, so that a
   benchmark can time each candidate shape on the same build
   (bench/bench.py's `tune` group). The ops copy it into every launch's
   arguments (row_shape); the generated launchers use it (xent_device.h's
   xent_asked_shape). */
#include "runtime/base/internal.h"

static int power_of_two(int v) { return v > 0 && (v & (v - 1)) == 0; }

xent_status xent_set_row_shape(xent_handle* h, int threads_per_row, int block_threads) {
  xent_clear_error();
  if (!h) return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "xent_set_row_shape: handle is NULL");
  if (block_threads == 0 && threads_per_row == XENT_ROW_SHAPE_ON_CHIP) {
    h->row_group = XENT_ROW_SHAPE_ON_CHIP;
    h->row_threads = 0;
    return XENT_OK;
  }
  if (block_threads == 0) {
    if (threads_per_row != 0)
      return xent_fail(XENT_ERROR_INVALID_ARGUMENT,
                       "xent_set_row_shape: threads_per_row is %d with block_threads 0 (0, 0 restores the tune tables; "
                       "XENT_ROW_SHAPE_ON_CHIP, 0 asks for the row on chip)",
                       threads_per_row);
    h->row_group = 0;
    h->row_threads = 0;
    return XENT_OK;
  }
  /* What depends on the rendering (its warp: 32 lanes, 64 on HIP) and on
     the kernel (its launch bounds) is the launcher's to refuse
     (xent_device.h's xent_asked_shape): this layer knows neither. */
  if (!power_of_two(block_threads) || block_threads < 32 || block_threads > 1024)
    return xent_fail(XENT_ERROR_INVALID_ARGUMENT,
                     "xent_set_row_shape: block_threads must be a power of two from 32 to 1024, got %d", block_threads);
  if (threads_per_row != 0 && (!power_of_two(threads_per_row) || threads_per_row > 64))
    return xent_fail(XENT_ERROR_INVALID_ARGUMENT,
                     "xent_set_row_shape: threads_per_row must be 0 (the block) or a power of two up to the warp "
                     "(32, 64 on HIP), got %d",
                     threads_per_row);
  h->row_group = threads_per_row;
  h->row_threads = block_threads;
  return XENT_OK;
}

/* xent_set_column_slices (xent.h): the ops read it when they size and run a
   strided call (runtime/ops/column_split.c). */
xent_status xent_set_column_slices(xent_handle* h, int slices) {
  xent_clear_error();
  if (!h) return xent_fail(XENT_ERROR_INVALID_ARGUMENT, "xent_set_column_slices: handle is NULL");
  if (slices < 0 || slices > XENT_MAX_COLUMN_SLICES)
    return xent_fail(XENT_ERROR_INVALID_ARGUMENT,
                     "xent_set_column_slices: slices must be 0 (the runtime's choice), 1 (none) or up to %d, got %d",
                     XENT_MAX_COLUMN_SLICES, slices);
  h->column_slices = slices;
  return XENT_OK;
}
