#include "runtime/dispatch/dispatch.h"

#include <stdio.h>
#include <string.h>

#include "runtime/backend/backend.h"

const xent_dispatch_entry* xent_table_find(const xent_dispatch_entry* table, size_t count, const char* key) {
  size_t lo = 0, hi = count;
  while (lo < hi) {
    const size_t mid = lo + (hi - lo) / 2;
    const int cmp = strcmp(table[mid].key, key);
    if (cmp == 0) return &table[mid];
    if (cmp < 0) lo = mid + 1;
    else hi = mid;
  }
  return NULL;
}

static const char* op_token(xent_op op) {
  switch (op) {
    case XENT_OP_FORWARD: return "fwd";
    case XENT_OP_BACKWARD: return "bwd";
    case XENT_OP_FORWARD_BACKWARD: return "fwd_bwd";
  }
  return "?";
}

static const char* reduction_token(xent_reduction r) {
  switch (r) {
    case XENT_REDUCTION_NONE: return "none";
    case XENT_REDUCTION_SUM: return "sum";
    case XENT_REDUCTION_MEAN: return "mean";
  }
  return "?";
}

static const char* label_token(xent_label_type t) {
  switch (t) {
    case XENT_I32: return "i32";
    case XENT_I64: return "i64";
    case XENT_PROB: return "prob";
  }
  return "?";
}

/* The base key <prefix>_<op>_<dtype>_<label>_<reduction> of a call. */
static void ce_base_key(const char* prefix, const xent_ce_desc* d, xent_op op, char* buf, size_t cap) {
  snprintf(buf, cap, "%s_%s_%s_%s_%s", prefix, op_token(op), xent_dtype_name(d->dtype), label_token(d->label_type),
           reduction_token(d->reduction));
}

/* "the spec of family F (S)": the spec files the table's variants of F came
   from, as the build named them, or F's file under specs/ where the table
   has none of F (its spec left the family out). */
static void spec_of(const xent_table* t, const char* family, char* buf, size_t cap) {
  int len = snprintf(buf, cap, "the spec of family %s (", family), n = 0;
  for (const xent_dispatch_spec* s = t->specs; s && s->family; ++s) {
    if (strcmp(s->family, family) != 0) continue;
    len += snprintf(buf + len, cap > (size_t)len ? cap - (size_t)len : 0, "%s%s", n++ ? " or " : "", s->spec);
  }
  if (n == 0) len += snprintf(buf + len, cap > (size_t)len ? cap - (size_t)len : 0, "specs/%s.lua", family);
  snprintf(buf + len, cap > (size_t)len ? cap - (size_t)len : 0, ")");
}

/* Families whose axes are cross_entropy's (ce, lce): the most specialized
   key of the call that the table has. */
static const xent_dispatch_entry* lookup_ce_axes(const char* prefix, const char* family, const xent_table* t,
                                                 const xent_ce_desc* d, xent_op op, int has_weights, char* key,
                                                 size_t key_cap) {
  char base[96];
  ce_base_key(prefix, d, op, base, sizeof base);
  /* The option axes in key order (gen/lua/dsl.lua's schema) and the
     specialized value this call needs for each. */
  enum { AXES = 5 };
  static const char* const names[AXES] = {"weights", "label_smoothing", "ignore_index", "z_loss", "softcap"};
  const char* wanted[AXES] = {
      has_weights ? "weighted" : "unweighted",
      d->label_smoothing != 0 ? "smooth" : "nosmooth",
      d->ignore_index != XENT_NO_IGNORE_INDEX ? "ignore" : "noignore",
      d->z_loss != 0 ? "zloss" : "nozloss",
      d->softcap != 0 ? "softcap" : "nocap",
  };
  /* Bit i set = axis i specialized in the key; the most specialized key that
     exists wins, the key with every option at run time comes last. */
  for (int mask = (1 << AXES) - 1; mask >= 0; --mask) {
    int len = snprintf(key, key_cap, "%s", base);
    for (int axis = 0; axis < AXES; ++axis) {
      if (mask & (1 << axis)) len += snprintf(key + len, key_cap > (size_t)len ? key_cap - (size_t)len : 0, "_%s", wanted[axis]);
    }
    const xent_dispatch_entry* e = xent_table_find(t->entries, t->count, key);
    if (e) return e;
  }
  snprintf(key, key_cap, "%s", base);
  char options[256];
  int len = 0;
  for (int axis = 0; axis < AXES; ++axis)
    len += snprintf(options + len, sizeof options - (size_t)len, "%s%s: %s", axis ? ", " : "", names[axis], wanted[axis]);
  char spec[512];
  spec_of(t, family, spec, sizeof spec);
  xent_fail(XENT_ERROR_NOT_GENERATED, "no %s kernel was generated for %s (%s): add it to %s and rebuild", t->target,
            base, options, spec);
  return NULL;
}

const xent_dispatch_entry* xent_ce_lookup(const xent_table* t, const xent_ce_desc* d, xent_op op, int has_weights,
                                       char* key, size_t key_cap) {
  return lookup_ce_axes("ce", "cross_entropy", t, d, op, has_weights, key, key_cap);
}

const xent_dispatch_entry* xent_lce_lookup(const xent_table* t, const xent_ce_desc* d, int has_weights, char* key,
                                        size_t key_cap) {
  return lookup_ce_axes("lce", "linear_cross_entropy", t, d, XENT_OP_FORWARD_BACKWARD, has_weights, key, key_cap);
}

const xent_dispatch_entry* xent_softmax_lookup(const xent_table* t, const xent_softmax_desc* d, xent_op op, char* key,
                                            size_t key_cap) {
  snprintf(key, key_cap, "sm_%s_%s_%s", op_token(op), xent_dtype_name(d->dtype),
           d->kind == XENT_LOG_SOFTMAX ? "log_softmax" : "softmax");
  const xent_dispatch_entry* e = xent_table_find(t->entries, t->count, key);
  if (!e) {
    char spec[512];
    spec_of(t, "softmax", spec, sizeof spec);
    xent_fail(XENT_ERROR_NOT_GENERATED, "no %s kernel was generated for %s: add it to %s and rebuild", t->target, key,
              spec);
  }
  return e;
}

xent_ce_args xent_ce_args_for(const xent_ce_desc* d, const xent_ce_call* call) {
  const xent_ce_tensors* t = &call->t;
  const int forward = call->op != XENT_OP_BACKWARD, backward = call->op != XENT_OP_FORWARD;
  /* Pointers the op does not use are passed as NULL, so a kernel never
     touches a tensor the caller did not mean for this op. */
  const xent_ce_args args = {
      .rows = d->rows,
      .classes = d->classes,
      .inner = d->inner,
      .class_offset = d->vocab_shard ? d->vocab_shard->class_offset : 0,
      .global_classes = d->vocab_shard ? d->vocab_shard->global_classes : d->classes,
      .logits = t->logits,
      .labels = t->labels,
      .weights = t->weights,
      .lse_in = call->op == XENT_OP_BACKWARD ? t->lse_in : NULL,
      .dloss = backward ? t->dloss : NULL,
      .grad_bias = backward ? t->grad_bias : NULL,
      .loss = forward ? t->loss : NULL,
      .lse_out = forward ? t->lse : NULL,
      .log_prob = forward ? t->log_prob : NULL,
      .softmax = forward ? t->softmax : NULL,
      .grad = backward ? t->grad : NULL,
      .grad_labels = backward && d->label_type == XENT_PROB ? t->grad_labels : NULL,
      .workspace = call->workspace,
      .ignore_index = d->ignore_index,
      .label_smoothing = d->label_smoothing,
      .z_loss = d->z_loss,
      .softcap = d->softcap,
      .all_ignored_zero = d->all_ignored_zero,
      .ignore_invalid_labels = d->invalid_labels == XENT_INVALID_LABELS_IGNORE,
      .loss_f32 = d->loss_dtype != d->dtype,
      .grad_f32 = d->grad_dtype != d->dtype,
      .bad_label_row = call->bad_label_row,
      .stream = call->stream,
  };
  return args;
}

/* A handle's entries, from its backend's table, and their launch. */
xent_status xent_backend_launch(xent_handle* h, const xent_dispatch_entry* e, const void* args) {
  return h->backend->launch(h, e, args);
}

const xent_dispatch_entry* xent_ce_find(const xent_handle* h, const xent_ce_desc* d, xent_op op, int has_weights) {
  xent_table table;
  h->backend->table(h, &table);
  char key[160];
  return xent_ce_lookup(&table, d, op, has_weights, key, sizeof key);
}

const xent_dispatch_entry* xent_lce_find(const xent_handle* h, const xent_ce_desc* d, int has_weights) {
  xent_table table;
  h->backend->table(h, &table);
  char key[160];
  return xent_lce_lookup(&table, d, has_weights, key, sizeof key);
}
