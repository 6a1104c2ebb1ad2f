/* xentgen --check's driver (check.h): a scratch directory with the rendered
   launch header and the shared headers' precompiled header, then every rendered kernel
   file parsed from memory on two threads, each translation unit handed to
   every rule (rules.h). */
#define _XOPEN_SOURCE 700 /* realpath */
#include "gen/check/check.h"

#include <clang-c/Index.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "gen/check/rules.h"

#define MAX_ARGS 24
#define THREADS 2
#define DIR_CAP 1024  /* the scratch directory's path */
#define PATH_CAP (DIR_CAP + 512)

typedef struct check_run {
  const gen_output_set* outputs;
  const gen_check_options* opt;
  char dir[DIR_CAP];  /* scratch: headers, prelude, PCH */
  char pch[PATH_CAP];
  const char* args[MAX_ARGS];
  char arg_text[5][PATH_CAP]; /* the arguments args points into */
  int nargs;
  size_t* kernels; /* indices into outputs of the kernel files */
  size_t nkernels;
  char (*launchers)[256]; /* per kernel file: the launcher it defines ("" if not one) */
  const gen_output* dispatch;
  size_t next;     /* the next kernel to take (under lock) */
  pthread_mutex_t lock;
  int findings, failed;
  char failure[1800];
  /* The HIP-on-CUDA headers' directory, absolute as libclang names the
     files it reads there: joined to the working directory, and with its
     links resolved (a sandbox's inputs are links); "" if none. */
  char shim[PATH_MAX], shim_real[PATH_MAX];
  /* The same for the device library's directory (never "": required). */
  char headers[PATH_MAX], headers_real[PATH_MAX];
} check_run;

static int is_kernel(const char* name) {
  const char* dot = strrchr(name, '.');
  return dot && (strcmp(dot, ".cu") == 0 || strcmp(dot, ".hip") == 0);
}

static int write_file(const char* dir, const char* name, const char* text, gen_error* err) {
  char path[PATH_CAP];
  if (strlen(name) > 200) return gen_fail(err, "--check: file name too long: %.40s...", name);
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE* f = fopen(path, "wb");
  if (!f) return gen_fail(err, "--check: cannot write %s: %s", path, strerror(errno));
  const size_t n = strlen(text);
  const int ok = fwrite(text, 1, n, f) == n;
  if (fclose(f) != 0 || !ok) return gen_fail(err, "--check: cannot write %s", path);
  return 0;
}

/* The compiler arguments for the target (check.h says why these modes). */
static int set_args(check_run* r, gen_error* err) {
  char *include_dir = r->arg_text[0], *stubs = r->arg_text[1], *rocm = r->arg_text[2], *shim = r->arg_text[3];
  char* library = r->arg_text[4];
  snprintf(include_dir, PATH_CAP, "-I%s", r->dir);
  snprintf(library, PATH_CAP, "-I%.1400s", r->opt->device_headers);
  const char** a = r->args;
  int n = 0;
  /* The library's target, as each rendered unit defines it. */
  a[n++] = strcmp(r->opt->target, "hip") == 0 ? "-DXENT_TARGET_HIP" : "-DXENT_TARGET_CUDA";
  const char* stub_dir = r->opt->cuda_headers ? r->opt->cuda_headers : "gen/check/cuda";
  const int hip = strcmp(r->opt->target, "hip") == 0, hip_on_cuda = hip && r->opt->hip_on_cuda_headers;
  if (hip && !hip_on_cuda) {
    const char* env = getenv("ROCM_PATH");
    struct stat st;
    const char* path = env && *env ? env : stat("/opt/rocm/include/hip/hip_runtime.h", &st) == 0 ? "/opt/rocm" : "/usr";
    snprintf(rocm, PATH_CAP, "--rocm-path=%.1400s", path);
    a[n++] = "-x";
    a[n++] = "hip";
    a[n++] = "--cuda-device-only";
    a[n++] = "-nogpulib";
    a[n++] = rocm;
    a[n++] = "--offload-arch=gfx90a";
    a[n++] = "-std=c++17";
  } else if (hip_on_cuda || strcmp(r->opt->target, "cuda") == 0) {
    if (hip_on_cuda) {
      /* <hip/hip_runtime.h> is the shim, over the stand-in CUDA headers. */
      snprintf(shim, PATH_CAP, "-I%.1400s", r->opt->hip_on_cuda_headers);
      a[n++] = "-DXENT_CHECK_HIP_ON_CUDA";
      a[n++] = "-D__CUDACC__"; /* as nvcc defines it (-nocudainc skips clang's wrapper that would) */
      a[n++] = shim;
    }
    snprintf(stubs, PATH_CAP, "-I%.1400s", stub_dir);
    a[n++] = "-x";
    a[n++] = "cuda";
    a[n++] = "--cuda-device-only";
    a[n++] = "--cuda-gpu-arch=sm_90";
    a[n++] = "-nocudainc";
    a[n++] = "-nocudalib";
    a[n++] = "-std=c++17";
    a[n++] = stubs;
  } else {
    return gen_fail(err, "--check: no parse mode for target '%s'", r->opt->target);
  }
  a[n++] = include_dir;
  a[n++] = library;
  r->nargs = n;
  return 0;
}

static void fail_run(check_run* r, const char* fmt, const char* a, const char* b) {
  pthread_mutex_lock(&r->lock);
  if (!r->failed) snprintf(r->failure, sizeof r->failure, fmt, a, b);
  r->failed = 1;
  pthread_mutex_unlock(&r->lock);
}

/* Whether a translation unit has an error diagnostic; the first goes to buf. */
static int first_error(CXTranslationUnit tu, char* buf, size_t cap) {
  const unsigned n = clang_getNumDiagnostics(tu);
  for (unsigned i = 0; i < n; ++i) {
    CXDiagnostic d = clang_getDiagnostic(tu, i);
    const int bad = clang_getDiagnosticSeverity(d) >= CXDiagnostic_Error;
    if (bad) {
      CXString s = clang_formatDiagnostic(d, clang_defaultDiagnosticDisplayOptions());
      snprintf(buf, cap, "%s", clang_getCString(s));
      clang_disposeString(s);
    }
    clang_disposeDiagnostic(d);
    if (bad) return 1;
  }
  return 0;
}

/* Builds the precompiled header of the shared headers. */
static int make_pch(check_run* r, CXIndex index, gen_error* err) {
  static const char prelude[] = "#include \"xent_device.h\"\n#include \"xent_launch.h\"\n#include <math.h>\n";
  if (write_file(r->dir, "xent_check_prelude.h", prelude, err) != 0) return -1;
  char path[PATH_CAP];
  snprintf(path, sizeof path, "%s/xent_check_prelude.h", r->dir);
  snprintf(r->pch, sizeof r->pch, "%s/xent_check_prelude.pch", r->dir);
  CXTranslationUnit tu = NULL;
  const enum CXErrorCode e = clang_parseTranslationUnit2(index, path, r->args, r->nargs, NULL, 0,
                                                         CXTranslationUnit_Incomplete | CXTranslationUnit_ForSerialization, &tu);
  if (e != CXError_Success || !tu) return gen_fail(err, "--check: libclang could not parse the shared headers (error %d)", (int)e);
  char why[1024];
  if (first_error(tu, why, sizeof why)) {
    clang_disposeTranslationUnit(tu);
    return gen_fail(err, "--check: the shared headers do not parse: %s", why);
  }
  const int saved = clang_saveTranslationUnit(tu, r->pch, clang_defaultSaveOptions(tu));
  clang_disposeTranslationUnit(tu);
  if (saved != CXSaveError_None) return gen_fail(err, "--check: cannot save the precompiled header %s", r->pch);
  return 0;
}

/* One rendered output parsed from memory at path, or NULL with the run
   failed (libclang's error, or the first error diagnostic). */
static CXTranslationUnit parse_output(check_run* r, CXIndex index, const gen_output* out, const char* path,
                                      const char* const* args, int nargs) {
  struct CXUnsavedFile file = {path, out->text, (unsigned long)strlen(out->text)};
  CXTranslationUnit tu = NULL;
  const enum CXErrorCode e = clang_parseTranslationUnit2(index, path, args, nargs, &file, 1, CXTranslationUnit_None, &tu);
  if (e != CXError_Success || !tu) {
    fail_run(r, "--check: libclang could not parse %s%s", out->name, "");
    if (tu) clang_disposeTranslationUnit(tu);
    return NULL;
  }
  char why[1024];
  if (first_error(tu, why, sizeof why)) {
    fail_run(r, "--check: %.200s does not parse: %.1000s", out->name, why);
    clang_disposeTranslationUnit(tu);
    return NULL;
  }
  return tu;
}

static void check_one(check_run* r, CXIndex index, size_t k, int shared_headers) {
  const gen_output* out = &r->outputs->items[r->kernels[k]];
  char path[PATH_CAP];
  snprintf(path, sizeof path, "%s/%.200s", r->dir, out->name);
  const char* args[MAX_ARGS + 2];
  int n = 0;
  for (int i = 0; i < r->nargs; ++i) args[n++] = r->args[i];
  args[n++] = "-include-pch";
  args[n++] = r->pch;
  CXTranslationUnit tu = parse_output(r, index, out, path, args, n);
  if (!tu) return;
  check_ctx ctx = {.tu = tu, .target = r->opt->target, .file = path, .shared_headers = shared_headers,
                   .headers_given = r->opt->device_headers, .headers = r->headers, .headers_real = r->headers_real,
                   .hip_on_cuda = r->shim[0] ? r->shim : NULL, .hip_on_cuda_real = r->shim_real[0] ? r->shim_real : NULL};
  const CXCursor root = clang_getTranslationUnitCursor(tu);
  rule_index_width(&ctx, root);
  rule_deterministic(&ctx, root);
  rule_graph_safe(&ctx, root);
  rule_warp_sync(&ctx, root);
  rule_barrier_uniform(&ctx, root);
  char key[256];
  snprintf(key, sizeof key, "%.200s", out->name);
  char* dot = strrchr(key, '.');
  if (dot) *dot = 0;
  rule_abi_launcher(&ctx, root, key, r->launchers[k], sizeof r->launchers[k]);
  clang_disposeTranslationUnit(tu);
  pthread_mutex_lock(&r->lock);
  r->findings += ctx.findings;
  pthread_mutex_unlock(&r->lock);
}

/* The dispatch table against the launchers the kernel files define (abi). */
static void check_dispatch(check_run* r) {
  char path[PATH_CAP];
  snprintf(path, sizeof path, "%s/%.200s", r->dir, r->dispatch->name);
  char include[PATH_CAP];
  snprintf(include, sizeof include, "-I%s", r->dir);
  const char* args[] = {"-x", "c", "-std=c11", include};
  CXIndex index = clang_createIndex(0, 0);
  CXTranslationUnit tu = parse_output(r, index, r->dispatch, path, args, 4);
  if (tu) {
    const char** defined = calloc(r->nkernels ? r->nkernels : 1, sizeof *defined);
    size_t n = 0;
    for (size_t k = 0; defined && k < r->nkernels; ++k)
      if (r->launchers[k][0]) defined[n++] = r->launchers[k];
    check_ctx ctx = {.tu = tu, .target = r->opt->target, .file = path};
    rule_abi_dispatch(&ctx, clang_getTranslationUnitCursor(tu), defined, n);
    r->findings += ctx.findings;
    free(defined);
    clang_disposeTranslationUnit(tu);
  }
  clang_disposeIndex(index);
}

static void* worker(void* arg) {
  check_run* r = arg;
  CXIndex index = clang_createIndex(0, 0);
  for (;;) {
    pthread_mutex_lock(&r->lock);
    const size_t k = r->next++;
    const int stop = r->failed;
    pthread_mutex_unlock(&r->lock);
    if (stop || k >= r->nkernels) break;
    check_one(r, index, k, k == 0);
  }
  clang_disposeIndex(index);
  return NULL;
}

static void remove_scratch(const check_run* r) {
  static const char* const names[] = {"xent_launch.h", "xent_check_prelude.h", "xent_check_prelude.pch"};
  char path[PATH_CAP];
  for (size_t i = 0; i < sizeof names / sizeof names[0]; ++i) {
    snprintf(path, sizeof path, "%s/%s", r->dir, names[i]);
    unlink(path);
  }
  rmdir(r->dir);
}

/* dir joined to the working directory (as libclang names the files it reads
   there) and with its links resolved (a sandbox's inputs are links), each
   without a trailing slash: a file is in the directory when its path goes
   on with one. */
static int absolute_dir(const char* dir, const char* what, char* joined, char* real, gen_error* err) {
  char cwd[PATH_MAX / 2];
  if (!dir || !realpath(dir, real)) return gen_fail(err, "--check: %s %s: %s", what, dir ? dir : "(none)", strerror(errno));
  if (dir[0] == '/') snprintf(joined, PATH_MAX, "%s", dir);
  else if (getcwd(cwd, sizeof cwd)) snprintf(joined, PATH_MAX, "%s/%s", cwd, strncmp(dir, "./", 2) == 0 ? dir + 2 : dir);
  else snprintf(joined, PATH_MAX, "%s", real);
  for (char* d = joined; *d && d[strlen(d) - 1] == '/';) d[strlen(d) - 1] = 0;
  return 0;
}

int gen_check_outputs(const gen_output_set* outputs, const gen_check_options* opt, gen_error* err) {
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  check_run r;
  memset(&r, 0, sizeof r);
  r.outputs = outputs;
  r.opt = opt;
  pthread_mutex_init(&r.lock, NULL);
  const char* tmp = getenv("TMPDIR");
  if (!tmp || !*tmp || strlen(tmp) > DIR_CAP - 32) tmp = "/tmp";
  snprintf(r.dir, sizeof r.dir, "%s/xentgen-check-XXXXXX", tmp);
  if (!mkdtemp(r.dir)) return gen_fail(err, "--check: cannot make a scratch directory: %s", strerror(errno));
  r.kernels = calloc(outputs->count ? outputs->count : 1, sizeof *r.kernels);
  int rc = r.kernels ? 0 : gen_fail(err, "out of memory");
  for (size_t i = 0; rc == 0 && i < outputs->count; ++i) {
    const char* name = outputs->items[i].name;
    if (is_kernel(name)) r.kernels[r.nkernels++] = i;
    else if (strncmp(name, "xent_dispatch_", 14) == 0) r.dispatch = &outputs->items[i];
    else if (strcmp(name, "xent_launch.h") == 0)
      rc = write_file(r.dir, name, outputs->items[i].text, err);
  }
  r.launchers = calloc(outputs->count ? outputs->count : 1, sizeof *r.launchers);
  if (rc == 0 && !r.launchers) rc = gen_fail(err, "out of memory");
  if (rc == 0) rc = absolute_dir(opt->device_headers, "the device library's directory", r.headers, r.headers_real, err);
  if (rc == 0) {
    char path[PATH_MAX];
    struct stat st;
    snprintf(path, sizeof path, "%.4000s/xent_device.h", r.headers_real);
    if (stat(path, &st) != 0)
      rc = gen_fail(err, "--check: no xent_device.h in the device library's directory %s (--headers)", opt->device_headers);
  }
  if (rc == 0) rc = set_args(&r, err);
  if (rc == 0 && opt->hip_on_cuda_headers)
    rc = absolute_dir(opt->hip_on_cuda_headers, "the HIP-on-CUDA headers' directory", r.shim, r.shim_real, err);
  if (rc == 0) {
    CXIndex index = clang_createIndex(0, 0);
    rc = make_pch(&r, index, err);
    clang_disposeIndex(index);
  }
  if (rc == 0) {
    pthread_t threads[THREADS];
    int started = 0;
    for (int t = 0; t < THREADS; ++t)
      if (pthread_create(&threads[t], NULL, worker, &r) == 0) started++;
    if (started == 0) worker(&r);
    for (int t = 0; t < started; ++t) pthread_join(threads[t], NULL);
    if (!r.failed && r.dispatch) check_dispatch(&r);
    if (r.failed) rc = gen_fail(err, "%s", r.failure);
    else if (r.findings)
      rc = gen_fail(err, "--check: %d finding%s in the %s rendering%s (above); nothing written", r.findings,
                    r.findings == 1 ? "" : "s", opt->target, opt->hip_on_cuda_headers ? " as built for NVIDIA" : "");
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  if (opt->verbose)
    fprintf(stderr, "xentgen --check: %zu %s%s files in %.2f s, %d findings\n", r.nkernels, opt->target,
            opt->hip_on_cuda_headers ? " (on cuda)" : "",
            (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec), r.findings);
  remove_scratch(&r);
  free(r.kernels);
  free(r.launchers);
  pthread_mutex_destroy(&r.lock);
  return rc;
}
