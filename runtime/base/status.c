#include <stdarg.h>
#include <stdio.h>

#include "runtime/base/internal.h"

static _Thread_local char last_error[1024];

xent_status xent_fail(xent_status status, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(last_error, sizeof last_error, fmt, ap);
  va_end(ap);
  return status;
}

void xent_clear_error(void) { last_error[0] = 0; }

const char* xent_last_error(void) { return last_error; }

const char* xent_status_string(xent_status status) {
  switch (status) {
    case XENT_OK: return "success";
    case XENT_ERROR_INVALID_ARGUMENT: return "invalid argument";
    case XENT_ERROR_NOT_GENERATED: return "variant not generated (edit the spec and rebuild)";
    case XENT_ERROR_UNSUPPORTED_DEVICE: return "device architecture too old for this kernel";
    case XENT_ERROR_BACKEND_UNAVAILABLE: return "backend unavailable";
    case XENT_ERROR_WORKSPACE_TOO_SMALL: return "workspace too small";
    case XENT_ERROR_DEVICE: return "device runtime error";
    case XENT_ERROR_OUT_OF_MEMORY: return "out of memory";
    case XENT_ERROR_INVALID_LABEL: return "a label was outside [0, classes)";
    case XENT_ERROR_COLLECTIVE: return "the vocabulary-parallel collective failed";
    case XENT_ERROR_BLAS: return "the BLAS library is absent or failed";
  }
  return "unknown status";
}
