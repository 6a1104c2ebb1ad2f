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

/* What a lookup knows of the call: the descriptor of its family. */
typedef struct call_values {
  const xent_ce_desc* ce;      /* cross_entropy, linear_cross_entropy */
  const xent_softmax_desc* sm; /* softmax */
  int uses;                    /* XENT_USES_* */
} call_values;

/* The call's value on an axis of the table's schema: for a type axis its
   token, for an option whether it is on (the table names the token).
   Returns 0 for an axis this runtime does not know. The axes' names, order
   and tokens are the table's (gen/lua/dsl.lua's); what each means for a
   call is the one thing the runtime adds. */
static int axis_value(const char* axis, const call_values* c, const char** token, int* on) {
  *token = NULL;
  *on = 0;
  if (c->sm) {
    if (strcmp(axis, "dtype") == 0) *token = xent_dtype_name(c->sm->dtype);
    else if (strcmp(axis, "kind") == 0) *token = c->sm->kind == XENT_LOG_SOFTMAX ? "log_softmax" : "softmax";
    else return 0;
    return 1;
  }
  const xent_ce_desc* d = c->ce;
  if (strcmp(axis, "dtype") == 0) *token = xent_dtype_name(d->dtype);
  else if (strcmp(axis, "label") == 0) *token = label_token(d->label_type);
  else if (strcmp(axis, "reduction") == 0) *token = reduction_token(d->reduction);
  else if (strcmp(axis, "weights") == 0) *on = (c->uses & XENT_USES_WEIGHTS) != 0;
  else if (strcmp(axis, "label_smoothing") == 0) *on = d->label_smoothing != 0;
  else if (strcmp(axis, "ignore_index") == 0) *on = d->ignore_index != XENT_NO_IGNORE_INDEX;
  else if (strcmp(axis, "z_loss") == 0) *on = d->z_loss != 0;
  else if (strcmp(axis, "softcap") == 0) *on = d->softcap != 0;
  else if (strcmp(axis, "temperature") == 0) *on = d->temperature != 1.0 || (c->uses & XENT_USES_ROW_TEMPERATURE);
  else if (strcmp(axis, "token_stats") == 0) *on = (c->uses & XENT_USES_TOKEN_STATS) != 0;
  else if (strcmp(axis, "token_weight") == 0) *on = (c->uses & XENT_USES_TOKEN_WEIGHT) != 0;
  else return 0;
  return 1;
}

/* The number of words in a space-separated list. */
static int word_count(const char* list) {
  int n = 0;
  for (list += strspn(list, " "); *list; list += strspn(list, " ")) {
    list += strcspn(list, " ");
    ++n;
  }
  return n;
}

/* Word `index` of a space-separated list into buf; 0 if there is none. */
static int nth_word(const char* list, int index, char* buf, size_t cap) {
  for (int i = 0; *list; ++i) {
    const size_t len = strcspn(list, " ");
    if (i == index) {
      if (len == 0 || len >= cap) return 0;
      memcpy(buf, list, len);
      buf[len] = '\0';
      return 1;
    }
    list += len;
    list += strspn(list, " ");
  }
  return 0;
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

/* A family's axes, as a lookup resolves them against the call. */
enum { MAX_AXES = 16, MAX_OPTIONS = 8, TOKEN_CAP = 32 };
typedef struct resolved_axes {
  int count, options;
  const char* name[MAX_AXES];
  int option[MAX_AXES]; /* 1: an option axis, in a key where specialized */
  char token[MAX_AXES][TOKEN_CAP];
} resolved_axes;

/* The rows of the table's schema with this key prefix, each with the call's
   token. 0 with the failure recorded where the schema names an axis this
   runtime does not know or is malformed; `found` says whether the table has
   the family at all (a table with no kernels has no schema). */
static int resolve_axes(const xent_table* t, const char* prefix, const call_values* c, resolved_axes* r, int* found) {
  memset(r, 0, sizeof *r);
  *found = 0;
  for (const xent_axis_row* row = t->axes; row && (*row)[XENT_AXIS_FAMILY]; ++row) {
    if (strcmp((*row)[XENT_AXIS_PREFIX], prefix) != 0) continue;
    *found = 1;
    const char* axis = (*row)[XENT_AXIS_NAME];
    const int option = strcmp((*row)[XENT_AXIS_KIND], "option") == 0;
    const char* token;
    int on;
    if (!axis_value(axis, c, &token, &on)) {
      xent_fail(XENT_ERROR_NOT_GENERATED,
                "the %s table's keys have axis '%s' (family %s), which this libxent does not know: build libxent and "
                "its plugins from one checkout",
                t->target, axis, (*row)[XENT_AXIS_FAMILY]);
      return 0;
    }
    if (r->count == MAX_AXES || (option && r->options == MAX_OPTIONS) || option != (token == NULL) ||
        (option && word_count((*row)[XENT_AXIS_VALUES]) != 2) ||
        (option ? !nth_word((*row)[XENT_AXIS_VALUES], on, r->token[r->count], TOKEN_CAP)
                : snprintf(r->token[r->count], TOKEN_CAP, "%s", token) >= TOKEN_CAP)) {
      xent_fail(XENT_ERROR_NOT_GENERATED, "the %s table's key schema is malformed at axis '%s' (family %s)", t->target,
                axis, (*row)[XENT_AXIS_FAMILY]);
      return 0;
    }
    r->name[r->count] = axis;
    r->option[r->count] = option;
    r->options += option;
    ++r->count;
  }
  return 1;
}

/* prefix_op, then each axis in the schema's order: a type axis's token
   always, an option's where its bit in `mask` is set (bit i: the i-th
   option). */
static void build_key(const char* prefix, const char* op, const resolved_axes* r, unsigned mask, char* key,
                      size_t cap) {
  int len = snprintf(key, cap, "%s_%s", prefix, op);
  for (int axis = 0, option = 0; axis < r->count; ++axis) {
    const int keep = !r->option[axis] || (mask & (1u << option));
    option += r->option[axis];
    if (keep) len += snprintf(key + len, cap > (size_t)len ? cap - (size_t)len : 0, "_%s", r->token[axis]);
  }
}

/* Whether a key of the (sorted) table starts with the len bytes of key. */
static int table_has_prefix(const xent_table* t, const char* key, size_t len) {
  size_t lo = 0, hi = t->count;
  while (lo < hi) {
    const size_t mid = lo + (hi - lo) / 2;
    if (strncmp(t->entries[mid].key, key, len) < 0) lo = mid + 1;
    else hi = mid;
  }
  return lo < t->count && strncmp(t->entries[lo].key, key, len) == 0;
}

/* The largest option mask (build_key's) whose key the table has, into
   *best: the key built axis by axis in schema order, each option axis
   named and not, a branch left as soon as no key of the table starts with
   the key so far. A call's options are up to 8 axes, 256 keys to try one by
   one (tens of microseconds a call); the table's few variants of the call
   leave a handful of branches. */
static void best_mask(const xent_table* t, const resolved_axes* r, int axis, int option, unsigned mask, char* key,
                      size_t len, size_t cap, int* best) {
  if (axis == r->count) {
    if ((int)mask > *best && xent_table_find(t->entries, t->count, key)) *best = (int)mask;
    return;
  }
  const size_t tl = strlen(r->token[axis]);
  if (len + 1 + tl < cap) {
    key[len] = '_';
    memcpy(key + len + 1, r->token[axis], tl + 1);
    if (table_has_prefix(t, key, len + 1 + tl))
      best_mask(t, r, axis + 1, option + r->option[axis], r->option[axis] ? mask | (1u << option) : mask, key,
                len + 1 + tl, cap, best);
    key[len] = '\0';
  }
  if (r->option[axis]) best_mask(t, r, axis + 1, option + 1, mask, key, len, cap, best);
}

/* The most specialized key of the call that the table has: every option
   axis named, down to none (the kernel reads them all at run time), in
   build_key's mask order. On failure, NULL with XENT_ERROR_NOT_GENERATED
   recorded: the key without its options, the value the call needs on each,
   and the spec to edit. */
static const xent_dispatch_entry* lookup(const xent_table* t, const char* prefix, const char* family, const char* op,
                                         const call_values* c, char* key, size_t key_cap) {
  resolved_axes r;
  int found;
  if (!resolve_axes(t, prefix, c, &r, &found)) return NULL;
  if (found) {
    const int len = snprintf(key, key_cap, "%s_%s", prefix, op);
    int best = -1;
    if (len > 0 && (size_t)len < key_cap && table_has_prefix(t, key, (size_t)len))
      best_mask(t, &r, 0, 0, 0, key, (size_t)len, key_cap, &best);
    if (best >= 0) {
      build_key(prefix, op, &r, (unsigned)best, key, key_cap);
      return xent_table_find(t->entries, t->count, key);
    }
  }
  build_key(prefix, op, &r, 0, key, key_cap);
  char options[256] = "";
  int len = 0;
  for (int axis = 0; axis < r.count; ++axis) {
    if (!r.option[axis]) continue;
    len += snprintf(options + len, sizeof options > (size_t)len ? sizeof options - (size_t)len : 0, "%s%s: %s",
                    len ? ", " : " (", r.name[axis], r.token[axis]);
  }
  if (len) snprintf(options + len, sizeof options > (size_t)len ? sizeof options - (size_t)len : 0, ")");
  char spec[512];
  spec_of(t, family, spec, sizeof spec);
  if (!found) {
    xent_fail(XENT_ERROR_NOT_GENERATED, "no %s kernel was generated for family %s (the table has none): add it to %s "
              "and rebuild", t->target, family, spec);
  } else {
    xent_fail(XENT_ERROR_NOT_GENERATED, "no %s kernel was generated for %s%s: add it to %s and rebuild", t->target, key,
              options, spec);
  }
  return NULL;
}

const xent_dispatch_entry* xent_ce_lookup(const xent_table* t, const xent_ce_desc* d, xent_op op, int uses,
                                       char* key, size_t key_cap) {
  const call_values c = {.ce = d, .uses = uses};
  return lookup(t, "ce", "cross_entropy", op_token(op), &c, key, key_cap);
}

const xent_dispatch_entry* xent_lce_lookup(const xent_table* t, const xent_ce_desc* d, int uses, char* key,
                                        size_t key_cap) {
  const call_values c = {.ce = d, .uses = uses};
  return lookup(t, "lce", "linear_cross_entropy", op_token(XENT_OP_FORWARD_BACKWARD), &c, key, key_cap);
}

const xent_dispatch_entry* xent_softmax_lookup(const xent_table* t, const xent_softmax_desc* d, xent_op op, char* key,
                                            size_t key_cap) {
  const call_values c = {.sm = d};
  return lookup(t, "sm", "softmax", op_token(op), &c, key, key_cap);
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
      .class_offset_at = d->vocab_shard ? d->vocab_shard->class_offset_at : NULL,
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
      .inv_temperature = 1.0 / d->temperature,
      .entropy = forward ? t->entropy : NULL,
      .label_logprob = forward && d->label_type != XENT_PROB ? t->label_logprob : NULL,
      .argmax = forward && d->label_type != XENT_PROB ? t->argmax : NULL,
      .dentropy = backward ? t->dentropy : NULL,
      .row_temperature = t->temperature,
      .token_weight = t->token_weight,
      .token_weight_count = d->token_weight_mean == XENT_TOKEN_WEIGHT_MEAN_COUNT,
      .all_ignored_zero = d->all_ignored_zero,
      .ignore_invalid_labels = d->invalid_labels == XENT_INVALID_LABELS_IGNORE,
      .loss_f32 = d->loss_dtype != d->dtype,
      .grad_f32 = d->grad_dtype != d->dtype,
      .bad_label_row = call->bad_label_row,
      .row_shape = {.group = call->row_group, .threads = call->row_threads},
      .stream = call->stream,
  };
  return args;
}

/* A handle's entries, from its backend's table, and their launch. */
xent_status xent_backend_launch(xent_handle* h, const xent_dispatch_entry* e, const void* args) {
  return h->backend->launch(h, e, args);
}

xent_status xent_ce_launch(xent_handle* h, const xent_ce_desc* d, xent_op op, const xent_dispatch_entry* e,
                           const xent_ce_args* args) {
  if (h->backend->native_ce && h->backend->native(h)) return h->backend->native_ce(d, op, args);
  return xent_backend_launch(h, e, args);
}

xent_status xent_softmax_launch(xent_handle* h, const xent_softmax_desc* d, xent_op op,
                                const xent_dispatch_entry* e, const xent_softmax_args* args) {
  if (h->backend->native_softmax && h->backend->native(h)) return h->backend->native_softmax(d, op, args);
  return xent_backend_launch(h, e, args);
}

const xent_dispatch_entry* xent_ce_find(const xent_handle* h, const xent_ce_desc* d, xent_op op, int uses) {
  xent_table table;
  h->backend->table(h, &table);
  char key[160];
  return xent_ce_lookup(&table, d, op, uses, key, sizeof key);
}

const xent_dispatch_entry* xent_lce_find(const xent_handle* h, const xent_ce_desc* d, int uses) {
  xent_table table;
  h->backend->table(h, &table);
  char key[160];
  return xent_lce_lookup(&table, d, uses, key, sizeof key);
}
