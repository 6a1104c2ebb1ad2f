#include "error.h"

#include <stdarg.h>
#include <stdio.h>

int gen_fail(gen_error* err, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err->msg, sizeof err->msg, fmt, ap);
  va_end(ap);
  return -1;
}
