/* warp-sync (masks): in the CUDA rendering, every warp shuffle, vote and
   ballot names the lanes that take part (__shfl_xor_sync(mask, ...)),
   never a legacy maskless form (__shfl_xor, __any, __ballot): since Volta
   a warp's lanes do not run in lockstep, and a maskless form reads lanes
   that may not have arrived.

   The CUDA rendering is parsed as the emulator's host C++ (check.h), where
   the maskless forms are calls to xent_emu::shuffle_all and vote_all and
   the masked ones are not (runtime/emu/xent_emu.h). The HIP rendering is
   not held to this: ROCm's wavefronts run in lockstep and its HIP has only
   the maskless forms. */
#include <string.h>

#include "gen/check/rules.h"

static enum CXChildVisitResult visit(CXCursor c, CXCursor parent, CXClientData data) {
  (void)parent;
  check_ctx* ctx = data;
  if (check_skip(ctx, c)) return CXChildVisit_Continue;
  if (clang_getCursorKind(c) == CXCursor_CallExpr) {
    char name[256];
    check_callee(c, name, sizeof name);
    if (strcmp(name, "shuffle_all") == 0 || strcmp(name, "vote_all") == 0)
      check_report(ctx, c, "warp-sync", "a maskless warp %s (__shfl*, __any, __all, __ballot): name the lanes "
                   "with the _sync form (__shfl_xor_sync(0xffffffffu, ...))",
                   strcmp(name, "shuffle_all") == 0 ? "shuffle" : "vote");
  }
  return CXChildVisit_Recurse;
}

void rule_warp_sync(check_ctx* ctx, CXCursor tu) {
  if (strcmp(ctx->target, "cuda") == 0) clang_visitChildren(tu, visit, ctx);
}
