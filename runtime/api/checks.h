/* The API layer's checks, shared by its files: a descriptor's fields
   (api.c) and a call's buffers (checks.c). Each names the argument at fault
   in xent_last_error(). */
#ifndef XENT_API_CHECKS_H
#define XENT_API_CHECKS_H

#include <stddef.h>

#include "runtime/base/internal.h"

/* a x b elements of up to 8 bytes: an error naming them where the byte
   count overflows 64 bits (a <= 0 passes; its own check says why). */
xent_status xent_check_byte_count(const char* fn, int64_t a, const char* a_name, int64_t b, const char* b_name);
/* The row layout and dtype both families' descriptors share. */
xent_status xent_check_layout(const char* fn, int64_t rows, int64_t classes, int64_t inner, xent_dtype dtype);
/* Every field of a cross-entropy descriptor (and its vocab_shard), and h. */
xent_status xent_check_ce_desc(const char* fn, const xent_handle* h, const xent_ce_desc* d);

/* Byte ranges [a, a + an) and [b, b + bn) overlap (NULL or empty: never). */
int xent_overlaps(const void* a, size_t an, const void* b, size_t bn);
/* A non-NULL p is aligned to its elements of `align` bytes (a misaligned
   one is undefined behaviour in C and a fault on some GPUs). */
xent_status xent_check_aligned(const char* fn, const char* name, const void* p, size_t align);

/* One buffer of a call: its name, where it is, how many bytes the call
   touches there, the alignment its element type needs, and whether the call
   writes it. */
typedef struct xent_buffer {
  const char* name;
  const void* p;
  size_t bytes;
  size_t align;
  int written;
} xent_buffer;

/* The one overlap a call may allow: buffer `written` == buffer `read` (the
   same address), where `allowed`; `hint` ends the error otherwise. */
typedef struct xent_in_place {
  const char* read;
  const char* written;
  int allowed;
  const char* hint;
} xent_in_place;

/* Every buffer aligned to its element, and no buffer the call writes over
   another of the call (an output over an input, or over another output,
   gives wrong answers in any order the kernels could run), but in_place's. */
xent_status xent_check_buffers(const char* fn, const xent_buffer* all, size_t n, const xent_in_place* in_place);

#endif
