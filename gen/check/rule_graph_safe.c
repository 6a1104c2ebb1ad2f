/* graph-safe: a launcher can be captured into a CUDA (or HIP) graph.

   Under stream capture, a call that synchronises the device or a stream,
   copies or sets memory synchronously, or allocates or frees memory fails
   the capture (or silently orders work outside the graph). The launchers
   and everything else in a rendered file's host code may only enqueue
   work: kernel launches, the asynchronous forms, attribute and error
   queries. Device code cannot call these at all, so every function is
   checked. */
#include <string.h>

#include "gen/check/rules.h"

static const char* const kForbidden[] = {
    "DeviceSynchronize", "ThreadSynchronize", "StreamSynchronize", "EventSynchronize", "StreamQuery",
    "Memcpy", "Memcpy2D", "Memcpy3D", "MemcpyToSymbol", "MemcpyFromSymbol", "Memset", "Memset2D", "Memset3D",
    "Malloc", "MallocManaged", "MallocHost", "MallocPitch", "Malloc3D", "HostAlloc", "Free", "FreeHost",
    "HostRegister", "HostUnregister", "DeviceReset", "SetDevice",
};

/* `name` is cuda<X> or hip<X> for a forbidden X. */
static int forbidden(const char* name) {
  const char* x = strncmp(name, "cuda", 4) == 0 ? name + 4 : strncmp(name, "hip", 3) == 0 ? name + 3 : NULL;
  if (!x) return 0;
  for (size_t i = 0; i < sizeof kForbidden / sizeof kForbidden[0]; ++i)
    if (strcmp(x, kForbidden[i]) == 0) return 1;
  return 0;
}

static enum CXChildVisitResult visit(CXCursor c, CXCursor parent, CXClientData data) {
  (void)parent;
  check_ctx* ctx = data;
  if (check_skip(ctx, c)) return CXChildVisit_Continue;
  if (clang_getCursorKind(c) == CXCursor_CallExpr) {
    char name[256];
    check_callee(c, name, sizeof name);
    if (forbidden(name))
      check_report(ctx, c, "graph-safe", "%s synchronises or allocates: it breaks CUDA-graph capture of the launch "
                   "(use the stream-ordered, asynchronous form, or the caller's workspace)", name);
  }
  return CXChildVisit_Recurse;
}

void rule_graph_safe(check_ctx* ctx, CXCursor tu) { clang_visitChildren(tu, visit, ctx); }
