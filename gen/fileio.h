/* Reading inputs and writing outputs. Outputs are collected in memory and
   committed together: nothing is written unless every file rendered. */
#ifndef XENT_GEN_FILEIO_H
#define XENT_GEN_FILEIO_H

#include <stddef.h>

#include "error.h"

/* Reads a whole file; *text is NUL-terminated and must be freed. */
int gen_read_file(const char* path, char** text, size_t* size, gen_error* err);

typedef struct gen_output {
  char* name;      /* relative to the output directory */
  char* text;
} gen_output;

typedef struct gen_output_set {
  gen_output* items;
  size_t count, cap;
} gen_output_set;

/* Takes ownership of text (malloc'd). */
int gen_output_add(gen_output_set* set, const char* name, char* text, gen_error* err);
void gen_output_free(gen_output_set* set);

/* Writes every file to DIR (created if missing): each goes to a temporary
   file first, and only when all are written are they renamed into place.
   Files whose content is unchanged are not touched (their mtime stays, so
   make-style builds of vendored output rebuild only what changed). Files
   named in DIR's previous manifest.tsv that are no longer generated are
   removed. */
int gen_output_commit(const gen_output_set* set, const char* dir, gen_error* err);

#endif
