/* warp-sync (masks): in the CUDA rendering, every warp shuffle, vote and
   ballot names the lanes that take part (__shfl_xor_sync(mask, ...)),
   never a legacy maskless form (__shfl_xor, __any, __ballot): since Volta
   a warp's lanes do not run in lockstep, and a maskless form reads lanes
   that may not have arrived.

   The maskless forms are gone from CUDA for sm_70 and later; the stand-in
   headers the CUDA rendering is parsed against (gen/check/cuda) declare
   them so that a use is reported here, at its template line, rather than
   as a parse error. The HIP rendering is not held to this: ROCm's
   wavefronts run in lockstep and its HIP has only the maskless forms. */
#include <string.h>

#include "gen/check/rules.h"

static const char* const kShuffles[] = {"__shfl", "__shfl_up", "__shfl_down", "__shfl_xor"};
static const char* const kVotes[] = {"__any", "__all", "__ballot"};

static int listed(const char* name, const char* const* list, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (strcmp(name, list[i]) == 0) return 1;
  return 0;
}

static enum CXChildVisitResult visit(CXCursor c, CXCursor parent, CXClientData data) {
  (void)parent;
  check_ctx* ctx = data;
  if (check_skip(ctx, c)) return CXChildVisit_Continue;
  if (clang_getCursorKind(c) == CXCursor_CallExpr) {
    char name[256];
    check_callee(c, name, sizeof name);
    const int shuffle = listed(name, kShuffles, sizeof kShuffles / sizeof *kShuffles);
    if (shuffle || listed(name, kVotes, sizeof kVotes / sizeof *kVotes))
      check_report(ctx, c, "warp-sync", "a maskless warp %s (%s): name the lanes with the _sync form "
                   "(__shfl_xor_sync(0xffffffffu, ...))", shuffle ? "shuffle" : "vote", name);
  }
  return CXChildVisit_Recurse;
}

void rule_warp_sync(check_ctx* ctx, CXCursor tu) {
  if (strcmp(ctx->target, "cuda") == 0) clang_visitChildren(tu, visit, ctx);
}
