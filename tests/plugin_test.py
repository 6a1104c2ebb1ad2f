"""libxent's GPU backends as plugins (runtime/backend/plugin.h), as a user meets them.

Each case is a fresh process (a plugin, once loaded, stays loaded) that loads
a copy of libxent_shared.so from a directory of its own with ctypes, as the
Python package does, and reports xent_create's status, message and backend.
The oracle is the file layout the case sets up: which plugin is where, and
what is wrong with it.

  python3 plugin_test.py LIBXENT CUDA_PLUGIN FAKE_PLUGIN FAKE_ABI_PLUGIN
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile

OK, BACKEND_UNAVAILABLE = 0, 4
AUTO, CPU, CUDA, HIP = 0, 1, 2, 3

CHILD = r"""
import ctypes, json, sys
lib = ctypes.CDLL(sys.argv[1])
lib.xent_last_error.restype = ctypes.c_char_p
out = []
for kind in map(int, sys.argv[2:]):
    h = ctypes.c_void_p()
    status = lib.xent_create(ctypes.byref(h), kind)
    message = lib.xent_last_error().decode()
    backend = lib.xent_handle_backend(h) if status == 0 else None
    if status == 0:
        lib.xent_destroy(h)
    out.append({"kind": kind, "status": status, "message": message, "backend": backend})
print(json.dumps(out))
"""

failures = []


def check(name, ok, detail):
    print(("ok   " if ok else "FAIL ") + name + ("" if ok else ": " + detail))
    if not ok:
        failures.append(name)


def create(libdir, kinds, plugin_path=None):
    env = dict(os.environ)
    env.pop("XENT_PLUGIN_PATH", None)
    if plugin_path is not None:
        env["XENT_PLUGIN_PATH"] = plugin_path
    run = subprocess.run([sys.executable, "-c", CHILD, os.path.join(libdir, "libxent_shared.so")] +
                         [str(k) for k in kinds], env=env, capture_output=True, text=True, check=False)
    if run.returncode != 0:
        raise SystemExit("the child process failed:\n" + run.stdout + run.stderr)
    return json.loads(run.stdout)


def dynamic_section(path, tag):
    out = subprocess.run(["readelf", "-d", path], capture_output=True, text=True, check=True).stdout
    return [line.split("[", 1)[1].rstrip("]") for line in out.splitlines() if "(%s)" % tag in line]


def main():
    libxent, cuda_plugin, fake, fake_abi = [os.path.abspath(p) for p in sys.argv[1:5]]
    root = tempfile.mkdtemp(prefix="xent_plugin_test.")

    def layout(name, files):
        d = os.path.join(root, name)
        os.makedirs(d)
        for dest, src in files.items():
            if isinstance(src, bytes):
                with open(os.path.join(d, dest), "wb") as f:
                    f.write(src)
            else:
                shutil.copyfile(src, os.path.join(d, dest))
        return d

    # libxent itself needs no GPU runtime; the plugin exports its entry only.
    needed = dynamic_section(libxent, "NEEDED")
    gpu_libs = [n for n in needed if any(g in n for g in ("cudart", "cuda.so", "amdhip", "cublas", "nccl", "rccl"))]
    check("libxent_shared.so needs no GPU library", not gpu_libs, "NEEDED %s" % needed)
    plugin_needed = dynamic_section(cuda_plugin, "NEEDED")
    check("libxent_cuda.so needs libcudart", any("libcudart" in n for n in plugin_needed), "NEEDED %s" % plugin_needed)
    exports = subprocess.run(["nm", "-D", "--defined-only", cuda_plugin], capture_output=True, text=True,
                             check=True).stdout.split()
    check("libxent_cuda.so exports xent_plugin_open alone", exports[-1:] == ["xent_plugin_open"] and
          len(exports) == 3, "exports %s" % exports)

    # No plugin anywhere: each GPU kind names the file and where it looked;
    # AUTO is the cpu with no error left behind.
    alone = layout("alone", {"libxent_shared.so": libxent})
    cuda, hip, auto = create(alone, [CUDA, HIP, AUTO])
    for got, file in [(cuda, "libxent_cuda.so"), (hip, "libxent_hip.so")]:
        want = "plugin %s not found (looked in %s (beside libxent))" % (file, alone)
        check("not found: " + file, got["status"] == BACKEND_UNAVAILABLE and want in got["message"],
              "%s" % got)
    check("not found: AUTO is the cpu", auto["status"] == OK and auto["backend"] == CPU and not auto["message"],
          "%s" % auto)
    _, = create(alone, [CUDA], plugin_path="/nonexistent:" + alone + "/no")
    check("not found: XENT_PLUGIN_PATH is named", "XENT_PLUGIN_PATH=/nonexistent:%s/no" % alone in _["message"],
          "%s" % _)

    # The real CUDA plugin beside libxent: it loads, and either opens the
    # GPU or says, from the plugin's own path, that there is none; where
    # libcudart is missing, the loader's reason names it.
    beside = layout("beside", {"libxent_shared.so": libxent, "libxent_cuda.so": cuda_plugin})
    cuda, auto = create(beside, [CUDA, AUTO])
    path = os.path.join(beside, "libxent_cuda.so")
    if cuda["status"] == OK:
        check("CUDA plugin: a CUDA handle", cuda["backend"] == CUDA, "%s" % cuda)
        check("CUDA plugin: AUTO takes the GPU", auto["backend"] == CUDA, "%s" % auto)
    else:
        no_device = cuda["message"].startswith(path + ": cuda backend: no CUDA device")
        no_cudart = ("plugin %s could not be loaded" % path) in cuda["message"] and "libcudart" in cuda["message"]
        check("CUDA plugin without a GPU: named, with the reason", cuda["status"] == BACKEND_UNAVAILABLE and
              (no_device or no_cudart), "%s" % cuda)
        check("CUDA plugin without a GPU: AUTO is the cpu", auto["status"] == OK and auto["backend"] == CPU and
              not auto["message"], "%s" % auto)
        print("     (this machine: %s)" % cuda["message"])

    # The CUDA runtime is the user's (a wheel carries none): where it is
    # missing, the loader's reason names it. The plugin with its NEEDED
    # libcudart renamed to one no system has (the same length, so the
    # dynamic string table keeps its layout).
    soname = [n for n in plugin_needed if n.startswith("libcudart.so.")][:1]
    if soname:
        absent = soname[0][:-2] + "00" if not soname[0].endswith("00") else soname[0][:-2] + "99"
        with open(cuda_plugin, "rb") as f:
            image = f.read().replace(soname[0].encode() + b"\0", absent.encode() + b"\0")
        no_runtime = layout("no_runtime", {"libxent_shared.so": libxent, "libxent_cuda.so": image})
        cuda, auto = create(no_runtime, [CUDA, AUTO])
        path = os.path.join(no_runtime, "libxent_cuda.so")
        check("CUDA plugin, no CUDA runtime: named with the loader's reason", cuda["status"] == BACKEND_UNAVAILABLE and
              ("plugin %s could not be loaded" % path) in cuda["message"] and absent in cuda["message"],
              "%s, want %s named" % (cuda, absent))
        check("CUDA plugin, no CUDA runtime: AUTO is the cpu", auto["status"] == OK and auto["backend"] == CPU,
              "%s" % auto)

    # A plugin on XENT_PLUGIN_PATH (after a directory without it): its
    # backend's own error comes back through libxent, prefixed with its path.
    onpath = layout("onpath", {"libxent_hip.so": fake})
    hip, auto = create(alone, [HIP, AUTO], plugin_path=os.path.join(root, "empty") + ":" + onpath)
    want = os.path.join(onpath, "libxent_hip.so") + ": hip backend: no HIP device (a test plugin)"
    check("XENT_PLUGIN_PATH: the plugin's own error", hip["status"] == BACKEND_UNAVAILABLE and hip["message"] == want,
          "%s, want %r" % (hip, want))
    check("XENT_PLUGIN_PATH: AUTO is the cpu", auto["status"] == OK and auto["backend"] == CPU, "%s" % auto)

    # Another ABI, not a plugin, not loadable.
    for name, content, want in [
        ("abi", fake_abi, "has ABI version 999"),
        ("foreign", libxent, "is not a xent plugin (it lacks xent_plugin_open)"),
        ("garbage", b"not an ELF file\n", "could not be loaded"),
    ]:
        d = layout(name, {"libxent_hip.so": content})
        hip, auto = create(alone, [HIP, AUTO], plugin_path=d)
        path = os.path.join(d, "libxent_hip.so")
        check("%s plugin: named, with the reason" % name, hip["status"] == BACKEND_UNAVAILABLE and
              path in hip["message"] and want in hip["message"], "%s, want %r" % (hip, want))
        if name == "abi":
            check("abi plugin: this libxent's version is named", "this libxent has ABI version 10;" in hip["message"],
                  hip["message"])
        check("%s plugin: AUTO is the cpu" % name, auto["status"] == OK and auto["backend"] == CPU, "%s" % auto)

    shutil.rmtree(root)
    print("%d failed" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
