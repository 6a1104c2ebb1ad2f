/* Loading an optional library at run time (dlopen), so that libxent neither
   links against it nor fails to load where it is absent: the GPU backends'
   GEMM libraries (gemm_cuda.c, gemm_hip.c). */
#ifndef XENT_DYNLIB_H
#define XENT_DYNLIB_H

#include <stddef.h>

/* An entry point: where its address goes, and its name. */
typedef struct xent_dl_entry {
  void** slot;
  const char* name;
} xent_dl_entry;

/* Opens the first of `sonames` (`count` of them) that dlopen finds and
   looks up every entry. Returns 1, or 0 with `why` saying "<library> could
   not be loaded (<dlerror>); <hint>" or "<library> was loaded but lacks
   <entry>". */
int xent_dl_load(const char* library, const char* const* sonames, size_t count, const char* hint,
                 const xent_dl_entry* entries, size_t entry_count, char* why, size_t why_bytes);

#endif
