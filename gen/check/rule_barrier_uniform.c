/* warp-sync (barriers): every __syncthreads and cluster sync is reached
   under conditions that are the same in every thread that must reach it.

   A block barrier that some threads of the block skip is undefined on a
   GPU (a hang, or threads passing unsynchronised); a cluster sync needs
   every thread of the cluster. So for each barrier, and each call of a
   function that (transitively) reaches one, every condition that decides
   whether it is reached must be uniform: the same for the whole block (a
   cluster, for a cluster sync). The conditions are the enclosing if, loop,
   ?: and &&/|| conditions, and those of any earlier return, break or
   continue that lets some threads leave.

   Uniformity is a level each value gets, from the grid (the same
   everywhere) up to the thread:
     grid     constants, template parameters, kernel arguments, blockDim,
              gridDim, the cluster size;
     cluster  xent_cluster_id() (the cluster's index in the grid),
              xent_grid_row() (blockIdx.y: clusters run along x);
     block    blockIdx, the cluster rank, a block-wide vote (__syncthreads_or);
     warp     a HIP wavefront's vote (__any, __all, __ballot);
     thread   threadIdx, the lane id, and whatever any of these reach.
   A value's level is the highest of what it is computed from, through
   assignments (including those made under a condition, which take its
   level) and through loads: memory read at a uniform address is taken to
   be uniform, which holds in a race-free kernel (the emulator's race
   detectors check that).

   The analysis is per variable over the whole function (every assignment
   counts wherever it is), per struct field over the whole file (so
   xent_row_walk's lane varies and its group does not), and across calls by
   summaries: what a function returns in terms of its parameters, which
   barrier it reaches, and which of its parameters decide whether it does.
   A call site is then checked against them, so a finding names the call
   whose condition or argument varies. Lambdas are followed when they are
   defined; one that reaches a barrier is reported (the rule does not follow
   a lambda through the functions it is passed to). */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gen/check/rules.h"

enum { L_GRID, L_CLUSTER, L_BLOCK, L_WARP, L_THREAD };
static const char* const kLevelName[] = {"grid", "cluster", "block", "warp", "thread"};

#define MAX_PARAMS 64
#define MAX_ROUNDS 32

/* A value's level, and the parameters of the function being walked that
   it also depends on (bit i: parameter i). */
typedef struct val {
  int level;
  uint64_t params;
} val;

static val join(val a, val b) {
  val v = {a.level > b.level ? a.level : b.level, a.params | b.params};
  return v;
}

static val at_level(int level) {
  val v = {level, 0};
  return v;
}

/* The control context: what decides whether the code is reached, and the
   condition that made it vary most (for the report). */
typedef struct ctl {
  val v;
  CXCursor why;
} ctl;

static ctl ctl_join(ctl c, val cond, CXCursor why) {
  if (cond.level > c.v.level) c.why = why;
  c.v = join(c.v, cond);
  return c;
}

typedef struct summary {
  char name[128];
  int nparams;
  int need;                   /* the most varying control its barriers allow (L_THREAD: none) */
  char barrier[440];          /* the calls down to the barrier it reaches, for the report */
  int param_need[MAX_PARAMS]; /* the most varying argument allowed */
  int param_in[MAX_PARAMS];   /* the levels its arguments have at its call sites */
  val ret;                    /* in terms of its own parameters */
  int kernel;                 /* a kernel: a call of it is a launch */
} summary;

/* Entries keyed by a declaration cursor (variables, loops) or by a name
   (struct fields, functions). */
typedef struct entry {
  int used;
  uint64_t hash;
  CXCursor cursor;
  char* name;
  char* text; /* a memo: a call's callee, a member's field key */
  val v;
  CXCursor why; /* a loop's: the condition of the break that made it vary most */
  summary* fn;
} entry;

typedef struct table {
  entry* e;
  size_t cap, n;
} table;

typedef struct state {
  check_ctx* ctx;
  table vars, fields, fns, loops, memo, outs;
  int changed, report;
} state;

/* ---- tables ------------------------------------------------------------- */

static uint64_t hash_name(const char* s) {
  uint64_t h = 1469598103934665603ull;
  for (; *s; ++s) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

static void grow(table* t);

/* The slot for hash h holding cursor c (name NULL) or name, or the empty
   slot where it goes. */
static entry* slot(table* t, uint64_t h, CXCursor c, const char* name) {
  for (size_t i = h & (t->cap - 1);; i = (i + 1) & (t->cap - 1)) {
    entry* e = &t->e[i];
    if (!e->used) return e;
    if (e->hash != h) continue;
    if (name ? (e->name && strcmp(e->name, name) == 0) : (!e->name && clang_equalCursors(e->cursor, c))) return e;
  }
}

/* The entry for a cursor (name NULL) or a name, created if absent. */
static entry* lookup(table* t, CXCursor c, const char* name) {
  if ((t->n + 1) * 2 > t->cap) grow(t);
  const uint64_t h = name ? hash_name(name) : clang_hashCursor(c);
  entry* e = slot(t, h, c, name);
  if (!e->used) {
    e->used = 1;
    e->hash = h;
    e->cursor = c;
    if (name && !(e->name = strdup(name))) abort();
    t->n++;
  }
  return e;
}

static void grow(table* t) {
  const size_t cap = t->cap ? t->cap * 2 : 256;
  entry* bigger = calloc(cap, sizeof(entry));
  if (!bigger) abort();
  for (size_t i = 0; i < t->cap; ++i) {
    if (!t->e[i].used) continue;
    size_t j = t->e[i].hash & (cap - 1);
    while (bigger[j].used) j = (j + 1) & (cap - 1);
    bigger[j] = t->e[i];
  }
  free(t->e);
  t->e = bigger;
  t->cap = cap;
}

static void table_free(table* t) {
  for (size_t i = 0; i < t->cap; ++i) {
    free(t->e[i].name);
    free(t->e[i].text);
    free(t->e[i].fn);
  }
  free(t->e);
}

static void raise(state* st, entry* e, val v) {
  const val j = join(e->v, v);
  if (j.level != e->v.level || j.params != e->v.params) {
    e->v = j;
    st->changed = 1;
  }
}

static summary* fn_summary(state* st, const char* name) {
  entry* e = lookup(&st->fns, clang_getNullCursor(), name);
  if (!e->fn) {
    e->fn = calloc(1, sizeof(summary));
    if (!e->fn) abort();
    snprintf(e->fn->name, sizeof e->fn->name, "%s", name);
    e->fn->need = L_THREAD;
    for (int i = 0; i < MAX_PARAMS; ++i) e->fn->param_need[i] = L_THREAD;
  }
  return e->fn;
}

static summary* fn_find(state* st, const char* name) {
  if (st->fns.cap == 0) return NULL;
  const entry* e = slot(&st->fns, hash_name(name), clang_getNullCursor(), name);
  return e->used ? e->fn : NULL;
}

static void set_min(state* st, int* slot, int level) {
  if (level < *slot) {
    *slot = level;
    st->changed = 1;
  }
}

static void set_max(state* st, int* slot, int level) {
  if (level > *slot) {
    *slot = level;
    st->changed = 1;
  }
}

/* ---- what the code is made of -------------------------------------------- */

/* The built-in barriers: the scope whose every thread must reach them. The
   HIP-on-CUDA headers' wavefront barrier (runtime/hip_on_cuda: a 64-lane
   wavefront is two warps there, met at a named barrier of 64 threads) needs
   the wavefront. */
static int barrier_need(const char* name) {
  if (strcmp(name, "__syncthreads") == 0 || strncmp(name, "__syncthreads_", 14) == 0 ||
      strcmp(name, "__builtin_amdgcn_s_barrier") == 0)
    return L_BLOCK;
  if (strcmp(name, "xent_cluster_sync") == 0) return L_CLUSTER;
  if (strcmp(name, "xent_hip_on_cuda_wave_barrier") == 0) return L_WARP;
  return L_THREAD;
}

/* The level of a built-in variable or query, by name (-1: not one). HIP's
   wavefront votes answer the same in every lane of the wavefront (warp
   level: the wavefront is HIP's warp), whatever they are given; so does
   the HIP-on-CUDA headers' vote over the wavefront's two warps. */
static int source_level(const char* name) {
  if (strcmp(name, "xent_cluster_id") == 0 || strcmp(name, "xent_grid_row") == 0) return L_CLUSTER;
  if (strcmp(name, "__any") == 0 || strcmp(name, "__all") == 0 || strcmp(name, "__ballot") == 0 ||
      strcmp(name, "xent_hip_on_cuda_any") == 0)
    return L_WARP;
  static const char* const thread[] = {"threadIdx", "__lane_id", "__activemask", "thread_rank",
                                       "__builtin_amdgcn_workitem_id_x", "__builtin_amdgcn_workitem_id_y",
                                       "__builtin_amdgcn_workitem_id_z", "__builtin_amdgcn_mbcnt_lo",
                                       "__builtin_amdgcn_mbcnt_hi", "__ockl_get_local_id", "clock", "clock64"};
  static const char* const block[] = {"blockIdx", "xent_cluster_rank", "block_rank", "__ockl_get_group_id",
                                      "__builtin_amdgcn_workgroup_id_x", "__builtin_amdgcn_workgroup_id_y",
                                      "__builtin_amdgcn_workgroup_id_z", "__syncthreads_or", "__syncthreads_and",
                                      "__syncthreads_count"};
  for (size_t i = 0; i < sizeof thread / sizeof *thread; ++i)
    if (strcmp(name, thread[i]) == 0) return L_THREAD;
  for (size_t i = 0; i < sizeof block / sizeof *block; ++i)
    if (strcmp(name, block[i]) == 0) return L_BLOCK;
  return -1;
}

static const char* spelling(CXCursor c, char* buf, size_t cap) {
  CXString s = clang_getCursorSpelling(c);
  snprintf(buf, cap, "%s", clang_getCString(s));
  clang_disposeString(s);
  return buf;
}

/* The key of a struct field: "Struct::field", or "?field" when the member
   is not resolved (a dependent type). */
static void field_key(CXCursor member, char* buf, size_t cap) {
  char name[128], parent[128];
  check_name(member, name, sizeof name);
  CXCursor ref = clang_getCursorReferenced(member);
  if (!clang_Cursor_isNull(ref) && clang_getCursorKind(ref) == CXCursor_FieldDecl) {
    spelling(clang_getCursorSemanticParent(ref), parent, sizeof parent);
    snprintf(buf, cap, "%s::%s", parent, name);
  } else {
    snprintf(buf, cap, "?%s", name);
  }
}

/* A call's callee name or a member's field key, worked out once per
   cursor (the walk visits every cursor once per round). */
static const char* memo(state* st, CXCursor c, int is_member) {
  entry* e = lookup(&st->memo, c, NULL);
  if (!e->text) {
    char buf[320];
    if (is_member) field_key(c, buf, sizeof buf);
    else check_callee(c, buf, sizeof buf);
    if (!(e->text = strdup(buf))) abort();
  }
  return e->text;
}

/* ---- the walk ----------------------------------------------------------- */

typedef struct frame {
  CXCursor loop;
  int is_switch;
} frame;

typedef struct walker {
  state* st;
  summary* fn;
  ctl exit;         /* raised by a return some threads take: applies after it */
  frame frames[64]; /* enclosing loops and switches */
  int nframes;
  int in_lambda;
} walker;

static val walk(walker* w, CXCursor c, ctl k);

/* The level of v once its parameters are replaced by what the function's
   callers pass (for values stored beyond the function: fields). */
static int concrete(const walker* w, val v) {
  int level = v.level;
  for (int i = 0; i < MAX_PARAMS; ++i)
    if ((v.params >> i & 1) && w->fn->param_in[i] > level) level = w->fn->param_in[i];
  return level;
}

static void store_field(walker* w, CXCursor member, val v) {
  char key[320], any[330];
  snprintf(key, sizeof key, "%s", memo(w->st, member, 1));
  const char* bare = key[0] == '?' ? key + 1 : strstr(key, "::") + 2;
  snprintf(any, sizeof any, "*%s", bare);
  const val c = at_level(concrete(w, v));
  raise(w->st, lookup(&w->st->fields, clang_getNullCursor(), key), c);
  raise(w->st, lookup(&w->st->fields, clang_getNullCursor(), any), c);
}

static val load_field(walker* w, CXCursor member) {
  char key[320], other[330];
  snprintf(key, sizeof key, "%s", memo(w->st, member, 1));
  /* A resolved field also takes what unresolved stores of its name did;
     an unresolved one, what any store of its name did. */
  if (key[0] == '?') snprintf(other, sizeof other, "*%s", key + 1);
  else snprintf(other, sizeof other, "?%s", strstr(key, "::") + 2);
  const val a = lookup(&w->st->fields, clang_getNullCursor(), key[0] == '?' ? other : key)->v;
  const val b = lookup(&w->st->fields, clang_getNullCursor(), key[0] == '?' ? key : other)->v;
  return join(a, b);
}

static enum CXChildVisitResult find_shared(CXCursor c, CXCursor parent, CXClientData data) {
  (void)parent;
  if (clang_getCursorKind(c) == CXCursor_CUDASharedAttr) *(int*)data = 1;
  return CXChildVisit_Continue;
}

/* An array in registers: a local array variable, not __shared__ memory. */
static int is_local_array(CXCursor decl) {
  const enum CXTypeKind k = clang_getCanonicalType(clang_getCursorType(decl)).kind;
  if (k != CXType_ConstantArray && k != CXType_IncompleteArray && k != CXType_VariableArray &&
      k != CXType_DependentSizedArray)
    return 0;
  int shared = 0;
  clang_visitChildren(decl, find_shared, &shared);
  return !shared;
}

/* An assignment of v to the lvalue `target` under k. */
static void assign(walker* w, CXCursor target, val v, ctl k) {
  target = check_strip_implicit(target);
  const val all = join(join(v, k.v), w->exit.v);
  switch (clang_getCursorKind(target)) {
    case CXCursor_DeclRefExpr: {
      CXCursor d = clang_getCursorReferenced(target);
      if (!clang_Cursor_isNull(d)) raise(w->st, lookup(&w->st->vars, d, NULL), all);
      break;
    }
    case CXCursor_MemberRefExpr:
      store_field(w, target, all);
      break;
    case CXCursor_ArraySubscriptExpr: {
      /* An element of a local array (registers) makes the array vary; one
         of memory through a pointer is memory, not tracked. */
      CXCursor base;
      if (check_children(target, &base, 1) == 1) {
        base = check_strip_implicit(base);
        CXCursor d = clang_getCursorReferenced(base);
        if (clang_getCursorKind(base) == CXCursor_DeclRefExpr && !clang_Cursor_isNull(d) && is_local_array(d))
          raise(w->st, lookup(&w->st->vars, d, NULL), all);
      }
      break;
    }
    default:
      break;
  }
}

static val walk_children(walker* w, CXCursor c, ctl k) {
  CXCursor kids[64];
  const int n = check_children(c, kids, 64);
  val v = at_level(L_GRID);
  for (int i = 0; i < n; ++i) v = join(v, walk(w, kids[i], k));
  return v;
}

/* The threads a barrier of that need waits for. */
static const char* scope_name(int need) {
  return need == L_CLUSTER ? "cluster" : need == L_WARP ? "wavefront" : "block";
}

static void report_reach(walker* w, CXCursor at, const char* what, int need, ctl k) {
  if (!w->st->report || !check_in_scope(w->st->ctx, at)) return;
  char cond[200];
  check_text(w->st->ctx->tu, k.why, cond, sizeof cond);
  check_report(w->st->ctx, at, "warp-sync",
               "%s is reached under a condition that differs between the threads of a %s ('%s' varies by %s)", what,
               scope_name(need), cond, kLevelName[k.v.level]);
}

/* The function declarations a call may call: the one it resolves to, or
   in a template, the candidates of its name. */
static int candidates(CXCursor call, CXCursor* out, int max) {
  CXCursor d = clang_getCursorReferenced(call);
  if (!clang_Cursor_isNull(d) && clang_getCursorKind(d) != CXCursor_OverloadedDeclRef) {
    out[0] = d;
    return 1;
  }
  CXCursor callee;
  if (check_children(call, &callee, 1) != 1) return 0;
  callee = check_strip_implicit(callee);
  if (clang_getCursorKind(callee) != CXCursor_OverloadedDeclRef) {
    d = clang_getCursorReferenced(callee);
    if (clang_Cursor_isNull(d)) return 0;
    if (clang_getCursorKind(d) != CXCursor_OverloadedDeclRef) {
      out[0] = d;
      return 1;
    }
    callee = d; /* an overload set reached through the callee's reference */
  }
  const unsigned n = clang_getNumOverloadedDecls(callee);
  int k = 0;
  for (unsigned i = 0; i < n && k < max; ++i) out[k++] = clang_getOverloadedDecl(callee, i);
  return k;
}

/* Whether a parameter type lets the callee change the caller's variable. */
static int writable_reference(CXType t) {
  return (t.kind == CXType_LValueReference || t.kind == CXType_RValueReference) &&
         !clang_isConstQualifiedType(clang_getPointeeType(t));
}

/* The variable an argument passes by reference or address, or the
   argument itself. */
static CXCursor out_target(CXCursor arg) {
  arg = check_strip_implicit(arg);
  if (clang_getCursorKind(arg) == CXCursor_UnaryOperator &&
      clang_getCursorUnaryOperatorKind(arg) == CXUnaryOperator_AddrOf) {
    CXCursor operand;
    if (check_children(arg, &operand, 1) == 1) return operand;
  }
  return arg;
}

/* Whether argument i of a call may be changed by the callee: passed by
   address, or to a non-const reference parameter of any candidate (all
   of them, when the rule cannot tell), unless it is a const variable. */
static int passed_out(CXCursor call, CXCursor arg, int i) {
  const CXCursor bare = check_strip_implicit(arg);
  if (clang_getCursorKind(bare) == CXCursor_UnaryOperator &&
      clang_getCursorUnaryOperatorKind(bare) == CXUnaryOperator_AddrOf)
    return 1;
  if (clang_isConstQualifiedType(clang_getCursorType(bare))) return 0;
  CXCursor cands[16];
  const int n = candidates(call, cands, 16);
  if (n == 0) return 1;
  for (int c = 0; c < n; ++c) {
    /* A function's own parameter declaration, whatever its type's spelling
       (attributes such as __device__ hide the prototype from libclang). */
    if (clang_getCursorKind(cands[c]) == CXCursor_FunctionDecl && clang_Cursor_getNumArguments(cands[c]) > i) {
      if (writable_reference(clang_getCursorType(clang_Cursor_getArgument(cands[c], (unsigned)i)))) return 1;
      continue;
    }
    const CXType t = clang_getCursorType(cands[c]);
    if (t.kind == CXType_FunctionProto && i < clang_getNumArgTypes(t)) {
      if (writable_reference(clang_getArgType(t, (unsigned)i))) return 1;
      continue;
    }
    /* A template: its parameters' declared types. */
    CXCursor kids[64 + MAX_PARAMS];
    const int nk = check_children(cands[c], kids, 64 + MAX_PARAMS);
    int p = 0, seen = 0;
    for (int j = 0; j < nk; ++j) {
      if (clang_getCursorKind(kids[j]) != CXCursor_ParmDecl) continue;
      if (p++ == i) {
        seen = 1;
        if (writable_reference(clang_getCursorType(kids[j]))) return 1;
      }
    }
    if (!seen) return 1; /* a parameter pack, or a call the rule misread */
  }
  return 0;
}

/* The arguments a call passes out (passed_out), as bits, once per call. */
static uint64_t out_args(state* st, CXCursor call, const CXCursor* argc, int nargs) {
  entry* e = lookup(&st->outs, call, NULL);
  if (!e->text) {
    uint64_t bits = 0;
    for (int i = 0; i < nargs; ++i)
      if (passed_out(call, argc[i], i)) bits |= (uint64_t)1 << i;
    e->v.params = bits;
    if (!(e->text = strdup(""))) abort();
  }
  return e->v.params;
}

/* A call: its value, the barriers it reaches, what it passes on. */
static val walk_call(walker* w, CXCursor c, ctl k) {
  char name[128];
  snprintf(name, sizeof name, "%s", memo(w->st, c, 0));
  CXCursor kids[64];
  val kv[64];
  const int n = check_children(c, kids, 64);
  val all = at_level(L_GRID);
  for (int i = 0; i < n; ++i) all = join(all, kv[i] = walk(w, kids[i], k));
  int nargs = clang_Cursor_getNumArguments(c);
  if (nargs > MAX_PARAMS) nargs = MAX_PARAMS;
  val args[MAX_PARAMS];
  CXCursor argc[MAX_PARAMS];
  for (int i = 0; i < nargs; ++i) {
    argc[i] = clang_Cursor_getArgument(c, (unsigned)i);
    int matched = 0;
    for (int j = 0; j < n && !matched; ++j)
      if (clang_equalCursors(kids[j], argc[i])) args[i] = kv[j], matched = 1;
    /* In a template the children may wrap the arguments: the argument
       itself, rather than everything the call is given. */
    if (!matched) args[i] = clang_Cursor_isNull(argc[i]) ? all : walk(w, argc[i], k);
  }
  const summary* s = fn_find(w->st, name);
  /* A kernel's threads start together: its launch is not a call. */
  if (s && s->kernel) return at_level(L_GRID);
  /* The built-in barriers and the functions that reach one. */
  int need = barrier_need(name);
  const char* which = need < L_THREAD ? name : "";
  if (s && s->need < need) {
    need = s->need;
    which = s->barrier;
  }
  if (need < L_THREAD) {
    char what[440];
    /* The call chain down to the barrier: f -> g -> __syncthreads. */
    if (!s || s->need >= barrier_need(name)) snprintf(what, sizeof what, "%s", which);
    else snprintf(what, sizeof what, "%s -> %.300s", name, which);
    if (w->in_lambda) {
      if (w->st->report && check_in_scope(w->st->ctx, c))
        check_report(w->st->ctx, c, "warp-sync", "%s in a lambda: the rule cannot follow a lambda to where it is "
                     "called; make it a function", what);
    } else {
      if (k.v.level > need) report_reach(w, c, what, need, k);
      for (int i = 0; i < MAX_PARAMS; ++i)
        if (k.v.params >> i & 1) set_min(w->st, &w->fn->param_need[i], need);
      if (need < w->fn->need) {
        w->fn->need = need;
        snprintf(w->fn->barrier, sizeof w->fn->barrier, "%s", what);
      }
    }
  }
  /* Arguments that decide whether the callee reaches its barrier. */
  if (s) {
    for (int i = 0; i < nargs && i < s->nparams; ++i) {
      if (s->param_need[i] >= L_THREAD) continue;
      if (args[i].level > s->param_need[i] && w->st->report && check_in_scope(w->st->ctx, c)) {
        char text[200];
        check_report(w->st->ctx, argc[i], "warp-sync",
                     "argument %d of %s ('%s') decides whether it reaches %s, and it differs between the threads "
                     "of a %s (it varies by %s)", i + 1, name, check_text(w->st->ctx->tu, argc[i], text, sizeof text),
                     s->barrier, scope_name(s->param_need[i]), kLevelName[args[i].level]);
      }
      for (int b = 0; b < MAX_PARAMS; ++b)
        if (args[i].params >> b & 1) set_min(w->st, &w->fn->param_need[b], s->param_need[i]);
    }
  }
  /* What the callee's parameters are given, for its own stores. */
  summary* callee = s ? fn_summary(w->st, name) : NULL;
  for (int i = 0; callee && i < nargs; ++i) set_max(w->st, &callee->param_in[i], concrete(w, args[i]));
  /* The value: the callee's return in terms of these arguments, or for a
     function the rule cannot see into, everything it is given. */
  val v;
  const int src = source_level(name);
  if (s) {
    v = at_level(s->ret.level);
    for (int i = 0; i < nargs && i < MAX_PARAMS; ++i)
      if (s->ret.params >> i & 1) v = join(v, args[i]);
  } else {
    v = all;
  }
  if (src >= 0) v = at_level(src); /* a vote's answer is uniform whatever it is given */
  /* Assignments written as calls (an operator of a dependent type), and
     variables passed by reference, which the callee may change. */
  const size_t len = strlen(name);
  if (strncmp(name, "operator", 8) == 0 && len > 8 && name[len - 1] == '=' && strcmp(name, "operator==") != 0 &&
      strcmp(name, "operator!=") != 0 && strcmp(name, "operator<=") != 0 && strcmp(name, "operator>=") != 0 &&
      nargs >= 1) {
    assign(w, argc[0], all, k);
  } else {
    const uint64_t out = out_args(w->st, c, argc, nargs);
    for (int i = 0; i < nargs; ++i)
      if (out >> i & 1) assign(w, out_target(argc[i]), join(all, v), k);
  }
  return v;
}

/* A function or lambda body, with the parameters as symbols. */
static void walk_function(state* st, summary* fn, CXCursor decl, CXCursor body, int in_lambda);

static void enter_loop(walker* w, CXCursor loop, int is_switch) {
  if (w->nframes < (int)(sizeof w->frames / sizeof *w->frames)) {
    w->frames[w->nframes].loop = loop;
    w->frames[w->nframes].is_switch = is_switch;
  }
  w->nframes++;
}

/* A break, continue or return that some threads take under k: the
   enclosing loop (all of them, for a return) runs on without them. */
static void leave(walker* w, ctl k, int all_loops, int is_break) {
  for (int i = w->nframes - 1; i >= 0; --i) {
    if (i >= (int)(sizeof w->frames / sizeof *w->frames)) continue;
    if (w->frames[i].is_switch) {
      if (is_break) return;
      continue;
    }
    const ctl at = ctl_join(k, w->exit.v, w->exit.why);
    entry* e = lookup(&w->st->loops, w->frames[i].loop, NULL);
    if (at.v.level > e->v.level) e->why = at.why;
    raise(w->st, e, at.v);
    if (!all_loops) return;
  }
}

static val walk_loop(walker* w, CXCursor c, ctl k) {
  CXCursor kids[8];
  const int n = check_children(c, kids, 8);
  if (n == 0) return at_level(L_GRID);
  const enum CXCursorKind kind = clang_getCursorKind(c);
  const entry* left = lookup(&w->st->loops, c, NULL);
  const val exits = left->v;
  const CXCursor exits_why = left->why;
  CXCursor body = kids[n - 1];
  int first_cond = 0, last_cond = n - 2;
  if (kind == CXCursor_DoStmt) body = kids[0], first_cond = 1, last_cond = n - 1;
  if (kind == CXCursor_ForStmt && n == 4) {
    walk(w, kids[0], k);
    first_cond = 1, last_cond = 2;
  }
  ctl inside = ctl_join(k, exits, exits_why);
  val cond = at_level(L_GRID);
  CXCursor why = c;
  for (int i = first_cond; i <= last_cond; ++i) {
    const val v = walk(w, kids[i], inside);
    if (v.level > cond.level) why = kids[i];
    cond = join(cond, v);
  }
  inside = ctl_join(inside, cond, why);
  enter_loop(w, c, 0);
  walk(w, body, inside);
  w->nframes--;
  return at_level(L_GRID);
}

static val walk(walker* w, CXCursor c, ctl k) {
  k = ctl_join(k, w->exit.v, w->exit.why);
  const enum CXCursorKind kind = clang_getCursorKind(c);
  switch (kind) {
    case CXCursor_IfStmt: {
      CXCursor kids[4];
      const int n = check_children(c, kids, 4);
      int i = 0;
      if (n == 4 || (n == 3 && clang_getCursorKind(kids[0]) == CXCursor_DeclStmt)) walk(w, kids[i++], k);
      const val cond = walk(w, kids[i], k);
      const ctl inside = ctl_join(k, cond, kids[i]);
      for (++i; i < n; ++i) walk(w, kids[i], inside);
      return at_level(L_GRID);
    }
    case CXCursor_SwitchStmt: {
      CXCursor kids[2];
      if (check_children(c, kids, 2) != 2) return walk_children(w, c, k);
      const val cond = walk(w, kids[0], k);
      enter_loop(w, c, 1);
      walk(w, kids[1], ctl_join(k, cond, kids[0]));
      w->nframes--;
      return at_level(L_GRID);
    }
    case CXCursor_ForStmt:
    case CXCursor_WhileStmt:
    case CXCursor_DoStmt:
    case CXCursor_CXXForRangeStmt:
      return walk_loop(w, c, k);
    case CXCursor_BreakStmt:
    case CXCursor_ContinueStmt:
      leave(w, k, 0, kind == CXCursor_BreakStmt);
      return at_level(L_GRID);
    case CXCursor_ReturnStmt: {
      const val v = walk_children(w, c, k);
      const val r = join(v, k.v);
      if (r.level > w->fn->ret.level || (r.params | w->fn->ret.params) != w->fn->ret.params) {
        w->fn->ret = join(w->fn->ret, r);
        w->st->changed = 1;
      }
      leave(w, k, 1, 0);
      w->exit = ctl_join(w->exit, k.v, k.why);
      return at_level(L_GRID);
    }
    case CXCursor_VarDecl: {
      const val v = walk_children(w, c, k);
      raise(w->st, lookup(&w->st->vars, c, NULL), join(v, k.v));
      return v;
    }
    case CXCursor_LambdaExpr: {
      CXCursor kids[64];
      const int n = check_children(c, kids, 64);
      for (int i = 0; i < n; ++i)
        if (clang_getCursorKind(kids[i]) == CXCursor_CompoundStmt)
          walk_function(w->st, fn_summary(w->st, "operator()"), c, kids[i], 1);
      return k.v;
    }
    case CXCursor_CallExpr:
      return walk_call(w, c, k);
    case CXCursor_DeclRefExpr: {
      char name[128];
      const int src = source_level(spelling(c, name, sizeof name));
      if (src >= 0) return at_level(src);
      CXCursor d = clang_getCursorReferenced(c);
      const enum CXCursorKind dk = clang_isInvalid(clang_getCursorKind(d)) ? CXCursor_InvalidCode : clang_getCursorKind(d);
      if (dk == CXCursor_VarDecl || dk == CXCursor_ParmDecl) return lookup(&w->st->vars, d, NULL)->v;
      return at_level(L_GRID);
    }
    case CXCursor_MemberRefExpr:
      return join(walk_children(w, c, k), load_field(w, c));
    case CXCursor_BinaryOperator:
    case CXCursor_CompoundAssignOperator: {
      CXCursor kids[2];
      if (check_children(c, kids, 2) != 2) return walk_children(w, c, k);
      const enum CXBinaryOperatorKind op = clang_getCursorBinaryOperatorKind(c);
      const val l = walk(w, kids[0], k);
      const int short_circuit = op == CXBinaryOperator_LAnd || op == CXBinaryOperator_LOr;
      const val r = walk(w, kids[1], short_circuit ? ctl_join(k, l, kids[0]) : k);
      if (op == CXBinaryOperator_Assign) {
        assign(w, kids[0], r, k);
        return r;
      }
      if (kind == CXCursor_CompoundAssignOperator) assign(w, kids[0], join(l, r), k);
      return join(l, r);
    }
    case CXCursor_UnaryOperator: {
      const val v = walk_children(w, c, k);
      const enum CXUnaryOperatorKind op = clang_getCursorUnaryOperatorKind(c);
      if (op == CXUnaryOperator_PostInc || op == CXUnaryOperator_PostDec || op == CXUnaryOperator_PreInc ||
          op == CXUnaryOperator_PreDec) {
        CXCursor operand;
        if (check_children(c, &operand, 1) == 1) assign(w, operand, v, k);
      }
      return v;
    }
    case CXCursor_ConditionalOperator: {
      CXCursor kids[3];
      if (check_children(c, kids, 3) != 3) return walk_children(w, c, k);
      const val cond = walk(w, kids[0], k);
      const ctl inside = ctl_join(k, cond, kids[0]);
      return join(cond, join(walk(w, kids[1], inside), walk(w, kids[2], inside)));
    }
    default:
      if (clang_isDeclaration(kind) && kind != CXCursor_VarDecl) return at_level(L_GRID);
      return walk_children(w, c, k);
  }
}

static void walk_function(state* st, summary* fn, CXCursor decl, CXCursor body, int in_lambda) {
  walker w;
  memset(&w, 0, sizeof w);
  w.st = st;
  w.fn = fn;
  w.in_lambda = in_lambda;
  w.exit.v = at_level(L_GRID);
  w.exit.why = body;
  /* The parameters, as symbols of themselves. */
  CXCursor kids[64 + MAX_PARAMS];
  const int n = check_children(decl, kids, 64 + MAX_PARAMS);
  int np = 0;
  for (int i = 0; i < n; ++i) {
    if (clang_getCursorKind(kids[i]) != CXCursor_ParmDecl) continue;
    if (np < MAX_PARAMS) {
      entry* e = lookup(&st->vars, kids[i], NULL);
      e->v.params |= (uint64_t)1 << np;
    }
    np++;
  }
  if (np > fn->nparams) fn->nparams = np < MAX_PARAMS ? np : MAX_PARAMS;
  ctl k = {at_level(L_GRID), body};
  walk(&w, body, k);
}

/* ---- the functions of a file --------------------------------------------- */

typedef struct fn_list {
  CXCursor* decl;
  CXCursor* body;
  size_t n, cap;
  const check_ctx* ctx;
} fn_list;

/* Code the analysis reads: the rendered file's and the shared headers'
   (their functions' summaries are needed in every file). */
static int readable(const check_ctx* ctx, CXCursor c) {
  CXFile file = NULL;
  clang_getExpansionLocation(clang_getCursorLocation(c), &file, NULL, NULL, NULL);
  if (!file) return 0;
  CXString name = clang_getFileName(file);
  const char* s = clang_getCString(name);
  int ok = s && (strcmp(s, ctx->file) == 0 || check_in_headers(ctx, s, NULL));
  /* The HIP-on-CUDA headers' shuffles and votes, where they hold barriers. */
  const char* const shim_dirs[] = {ctx->hip_on_cuda, ctx->hip_on_cuda_real};
  for (int i = 0; i < 2 && s && !ok; ++i) {
    if (!shim_dirs[i]) continue;
    const size_t n = strlen(shim_dirs[i]);
    ok = strncmp(s, shim_dirs[i], n) == 0 && s[n] == '/';
  }
  clang_disposeString(name);
  return ok;
}

static enum CXChildVisitResult collect(CXCursor c, CXCursor parent, CXClientData data) {
  (void)parent;
  fn_list* l = data;
  const enum CXCursorKind k = clang_getCursorKind(c);
  const int scope = k == CXCursor_Namespace || k == CXCursor_StructDecl || k == CXCursor_ClassDecl ||
                    k == CXCursor_ClassTemplate || k == CXCursor_LinkageSpec || k == CXCursor_UnexposedDecl;
  if (!scope && k != CXCursor_FunctionDecl && k != CXCursor_FunctionTemplate && k != CXCursor_CXXMethod)
    return CXChildVisit_Continue;
  if (!readable(l->ctx, c)) return CXChildVisit_Continue;
  if (scope) return CXChildVisit_Recurse;
  CXCursor kids[64 + MAX_PARAMS];
  const int n = check_children(c, kids, 64 + MAX_PARAMS);
  if (n == 0 || clang_getCursorKind(kids[n - 1]) != CXCursor_CompoundStmt) return CXChildVisit_Continue;
  if (l->n == l->cap) {
    l->cap = l->cap ? l->cap * 2 : 128;
    l->decl = realloc(l->decl, l->cap * sizeof *l->decl);
    l->body = realloc(l->body, l->cap * sizeof *l->body);
    if (!l->decl || !l->body) abort();
  }
  l->decl[l->n] = c;
  l->body[l->n] = kids[n - 1];
  l->n++;
  return CXChildVisit_Continue;
}

static enum CXChildVisitResult find_global(CXCursor c, CXCursor parent, CXClientData data) {
  (void)parent;
  if (clang_getCursorKind(c) == CXCursor_CUDAGlobalAttr) *(int*)data = 1;
  return CXChildVisit_Continue;
}

/* A __global__ function. */
static int is_kernel(CXCursor fn) {
  int found = 0;
  clang_visitChildren(fn, find_global, &found);
  return found;
}

void rule_barrier_uniform(check_ctx* ctx, CXCursor tu) {
  fn_list fns = {NULL, NULL, 0, 0, ctx};
  clang_visitChildren(tu, collect, &fns);
  state st;
  memset(&st, 0, sizeof st);
  st.ctx = ctx;
  char name[128];
  for (size_t i = 0; i < fns.n; ++i)
    fn_summary(&st, spelling(fns.decl[i], name, sizeof name))->kernel = is_kernel(fns.decl[i]);
  int rounds = 0;
  do {
    st.changed = 0;
    for (size_t i = 0; i < fns.n; ++i)
      walk_function(&st, fn_summary(&st, spelling(fns.decl[i], name, sizeof name)), fns.decl[i], fns.body[i], 0);
  } while (st.changed && ++rounds < MAX_ROUNDS);
  if (st.changed) {
    check_report(ctx, tu, "warp-sync", "the barrier analysis did not settle in %d rounds", MAX_ROUNDS);
  } else {
    st.report = 1;
    for (size_t i = 0; i < fns.n; ++i)
      walk_function(&st, fn_summary(&st, spelling(fns.decl[i], name, sizeof name)), fns.decl[i], fns.body[i], 0);
  }
  free(fns.decl);
  free(fns.body);
  table_free(&st.vars);
  table_free(&st.fields);
  table_free(&st.fns);
  table_free(&st.loops);
  table_free(&st.memo);
  table_free(&st.outs);
}
