"""The runtime's layers call only downward (docs/ARCHITECTURE.md).

Each folder of runtime/ is a layer, top to bottom:

  api/       the public API: every argument checked once
  ops/       validated calls run over the handle's kernels
  dispatch/  a call's keys looked up in the handle's table
  backend/   the backend interface (backend.h) and the plugin loader
  backends/  the backends: cpu, cuda, hip, and a plugin's entry
  base/      the handle, status, dtypes, dlopen; with runtime/xent.h,
             runtime/numeric.h and the generated xent_launch.h

Two checks, each of which fails on a climb:
  1. includes: no source includes a header of a layer above its own; a
     backend includes the interface it implements (backend/backend.h,
     backend/plugin.h) and nothing else above it;
  2. calls: in the compiled archives, no object refers to a symbol that an
     object of a higher layer defines (nm: what each object leaves
     undefined against what the others define).
And no layer above the backends branches on which backend a handle has.

  python3 layers_test.py RUNTIME_SOURCE... ARCHIVE...
"""

import os
import re
import subprocess
import sys

ORDER = ["base", "backends", "backend", "dispatch", "ops", "api"]
INTERFACE = {"runtime/backend/backend.h", "runtime/backend/plugin.h"}
BOTTOM = {"runtime/xent.h", "runtime/numeric.h", "runtime/numeric.c", "xent_launch.h"}


def layer_of(path):
    """The layer of a path inside runtime/ (its rank in ORDER), or None."""
    if path in BOTTOM:
        return 0
    m = re.match(r"runtime/([a-z_]+)/", path)
    return ORDER.index(m.group(1)) if m and m.group(1) in ORDER else None


def main():
    sources = [a for a in sys.argv[1:] if a.endswith((".c", ".cc", ".h"))]
    archives = [a for a in sys.argv[1:] if a.endswith((".lo", ".a"))]
    failures = []
    by_name = {}
    for src in sources:
        rel = src[src.index("runtime/"):]
        if layer_of(rel) is None:
            continue
        by_name[os.path.basename(rel)] = rel
    if len(by_name) < 25:
        failures.append("only %d runtime sources found in the layer folders" % len(by_name))

    # 1. Includes.
    includes = 0
    for src in sources:
        rel = src[src.index("runtime/"):]
        mine = layer_of(rel)
        if mine is None:
            continue
        for line in open(src):
            m = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
            if not m:
                continue
            includes += 1
            header = m.group(1)
            theirs = layer_of(header)
            if header.startswith("runtime/") and theirs is None and not header.startswith("runtime/emu/"):
                failures.append("%s includes %s, which is in no layer" % (rel, header))
            elif theirs is not None and theirs > mine and not (ORDER[mine] == "backends" and header in INTERFACE):
                failures.append("%s (%s) includes %s (%s, above it)" % (rel, ORDER[mine], header, ORDER[theirs]))
            elif theirs is None and not header.startswith("runtime/emu/") and "/" in header:
                failures.append("%s includes %s: name runtime headers from the repository's root" % (rel, header))
    print("includes: %d in %d files checked" % (includes, len(by_name)))

    # 2. Calls (and references to data, such as a backend's table).
    defined, undefined = {}, []
    for archive in archives:
        out = subprocess.run(["nm", "-A", archive], capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            m = re.match(r"^.*?:([^:]+\.o):\s*(?:[0-9a-f]+)?\s+([A-Za-z])\s+(\S+)$", line)
            if not m:
                continue
            obj, kind, symbol = m.groups()
            stem = re.sub(r"(\.pic)?\.o$", "", obj)
            source = by_name.get(stem + ".c") or by_name.get(stem + ".cc")
            if source is None:
                continue  # generated tables and kernels: below every layer
            if kind == "U":
                undefined.append((source, symbol))
            elif kind.isupper():
                defined.setdefault(symbol, set()).add(source)
    calls = 0
    for source, symbol in sorted(set(undefined)):
        for definer in sorted(defined.get(symbol, ())):
            calls += 1
            if layer_of(definer) > layer_of(source):
                failures.append("%s (%s) uses %s, defined by %s (%s, above it)" %
                                (source, ORDER[layer_of(source)], symbol, definer, ORDER[layer_of(definer)]))
    print("calls: %d references between runtime objects checked in %d archives" % (calls, len(archives)))
    if calls < 50:
        failures.append("only %d references between runtime objects: the archives were not read" % calls)

    # 3. No branch on the backend's kind above the backends.
    for src in sources:
        rel = src[src.index("runtime/"):]
        mine = layer_of(rel)
        if mine is None or ORDER[mine] in ("base", "backends", "backend"):
            continue
        for number, line in enumerate(open(src), 1):
            if re.search(r"(backend->kind|h->kind|handle->kind)\s*[=!]=|switch\s*\([^)]*backend->kind", line):
                failures.append("%s:%d branches on the backend's kind: %s" % (rel, number, line.strip()))

    for f in failures:
        print("FAIL " + f)
    print("%d failed" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
