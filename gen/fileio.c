#define _POSIX_C_SOURCE 200809L
#include "fileio.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int gen_read_file(const char* path, char** text, size_t* size, gen_error* err) {
  FILE* f = fopen(path, "rb");
  if (!f) return gen_fail(err, "%s: cannot read: %s", path, strerror(errno));
  size_t cap = 1 << 16, n = 0;
  char* buf = malloc(cap);
  while (buf) {
    n += fread(buf + n, 1, cap - n - 1, f);
    if (n < cap - 1) break;
    cap *= 2;
    char* grown = realloc(buf, cap);
    if (!grown) free(buf);
    buf = grown;
  }
  int failed = ferror(f);
  fclose(f);
  if (!buf) return gen_fail(err, "%s: out of memory", path);
  if (failed) {
    free(buf);
    return gen_fail(err, "%s: read error", path);
  }
  buf[n] = 0;
  *text = buf;
  if (size) *size = n;
  return 0;
}

int gen_output_add(gen_output_set* set, const char* name, char* text, gen_error* err) {
  for (size_t i = 0; i < set->count; ++i) {
    if (strcmp(set->items[i].name, name) == 0) {
      free(text);
      return gen_fail(err, "internal error: output %s generated twice", name);
    }
  }
  if (set->count == set->cap) {
    size_t cap = set->cap ? 2 * set->cap : 64;
    gen_output* items = realloc(set->items, cap * sizeof *items);
    if (!items) {
      free(text);
      return gen_fail(err, "out of memory");
    }
    set->items = items;
    set->cap = cap;
  }
  set->items[set->count].name = strdup(name);
  set->items[set->count].text = text;
  set->count++;
  return 0;
}

void gen_output_free(gen_output_set* set) {
  for (size_t i = 0; i < set->count; ++i) {
    free(set->items[i].name);
    free(set->items[i].text);
  }
  free(set->items);
  set->items = NULL;
  set->count = set->cap = 0;
}

/* Writes "dir/name" (name NULL: dir alone) into path[GEN_FILE_PATH_MAX];
   a path that would not fit is an error, never a truncated name. */
#define GEN_FILE_PATH_MAX 4096
static int join_path(char* path, const char* dir, const char* prefix, const char* name, const char* suffix,
                     gen_error* err) {
  const int n = name ? snprintf(path, GEN_FILE_PATH_MAX, "%s/%s%s%s", dir, prefix, name, suffix)
                     : snprintf(path, GEN_FILE_PATH_MAX, "%s", dir);
  if (n < 0 || n >= GEN_FILE_PATH_MAX)
    return gen_fail(err, "output path too long (at most %d characters): %.100s...", GEN_FILE_PATH_MAX - 1, dir);
  return 0;
}

static int make_dirs(const char* dir, gen_error* err) {
  char path[GEN_FILE_PATH_MAX];
  if (join_path(path, dir, "", NULL, "", err) != 0) return -1;
  for (char* p = path + 1; *p; ++p) {
    if (*p != '/') continue;
    *p = 0;
    if (mkdir(path, 0777) != 0 && errno != EEXIST) return gen_fail(err, "%s: cannot create: %s", path, strerror(errno));
    *p = '/';
  }
  if (mkdir(path, 0777) != 0 && errno != EEXIST) return gen_fail(err, "%s: cannot create: %s", path, strerror(errno));
  return 0;
}

static int same_content(const char* path, const char* text) {
  char* old = NULL;
  size_t n = 0;
  gen_error ignored;
  if (gen_read_file(path, &old, &n, &ignored) != 0) return 0;
  int same = n == strlen(text) && memcmp(old, text, n) == 0;
  free(old);
  return same;
}

static int is_generated(const gen_output_set* set, const char* name) {
  for (size_t i = 0; i < set->count; ++i) {
    if (strcmp(set->items[i].name, name) == 0) return 1;
  }
  return 0;
}

/* Removes files the previous run listed in manifest.tsv (column 4) that this
   run no longer generates: a variant dropped from a spec leaves no stale
   kernel behind for a `nvcc *.cu` of the directory. */
static void remove_stale(const gen_output_set* set, const char* dir) {
  char path[GEN_FILE_PATH_MAX];
  char* text = NULL;
  gen_error ignored;
  if (join_path(path, dir, "", "manifest.tsv", "", &ignored) != 0) return;
  if (gen_read_file(path, &text, NULL, &ignored) != 0) return;
  char* save = NULL;
  for (char* line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
    if (line[0] == '#') continue;
    char* field = line;
    for (int col = 0; col < 3 && field; ++col) {
      field = strchr(field, '\t');
      if (field) field++;
    }
    if (!field) continue;
    char* end = strchr(field, '\t');
    if (end) *end = 0;
    if (strchr(field, '/') || is_generated(set, field)) continue;
    if (join_path(path, dir, "", field, "", &ignored) == 0) unlink(path);
  }
  free(text);
}

int gen_output_commit(const gen_output_set* set, const char* dir, gen_error* err) {
  /* Every path is checked before anything is created. */
  char path[GEN_FILE_PATH_MAX], tmp[GEN_FILE_PATH_MAX], suffix[32];
  snprintf(suffix, sizeof suffix, ".tmp.%ld", (long)getpid());
  for (size_t i = 0; i < set->count; ++i) {
    if (join_path(tmp, dir, ".", set->items[i].name, suffix, err) != 0) return -1;
  }
  if (make_dirs(dir, err) != 0) return -1;
  char** temps = calloc(set->count ? set->count : 1, sizeof *temps);
  if (!temps) return gen_fail(err, "out of memory");
  int rc = 0;
  for (size_t i = 0; i < set->count && rc == 0; ++i) {
    join_path(path, dir, "", set->items[i].name, "", err);
    if (same_content(path, set->items[i].text)) continue;
    join_path(tmp, dir, ".", set->items[i].name, suffix, err);
    FILE* f = fopen(tmp, "wb");
    size_t len = strlen(set->items[i].text);
    if (!f) {
      rc = gen_fail(err, "%s: cannot write: %s", tmp, strerror(errno));
      break;
    }
    temps[i] = strdup(tmp);
    int ok = fwrite(set->items[i].text, 1, len, f) == len;
    ok = (fclose(f) == 0) && ok;
    if (!ok) rc = gen_fail(err, "%s: write failed: %s", tmp, strerror(errno));
  }
  if (rc == 0) remove_stale(set, dir);
  for (size_t i = 0; i < set->count; ++i) {
    if (!temps[i]) continue;
    join_path(path, dir, "", set->items[i].name, "", err);
    if (rc == 0 && rename(temps[i], path) != 0) rc = gen_fail(err, "%s: cannot rename into place: %s", path, strerror(errno));
    if (rc != 0) unlink(temps[i]);
    free(temps[i]);
  }
  free(temps);
  return rc;
}
