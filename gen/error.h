/* Errors are values: a function that can fail fills a gen_error and returns
   -1; main() prints the one message. */
#ifndef XENT_GEN_ERROR_H
#define XENT_GEN_ERROR_H

typedef struct gen_error {
  char msg[2048];
} gen_error;

/* printf-style; always returns -1 so callers can `return gen_fail(...)`. */
int gen_fail(gen_error* err, const char* fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

#endif
