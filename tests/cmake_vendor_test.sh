#!/bin/bash
# The CMake route of docs/INTEGRATION.md's "Using xent in your project", as a new user
# takes it: //cmake:vendor writes a tree of two variants; plain cmake builds
# it (the CUDA backend where nvcc is, the HIP backend where CMake finds a HIP
# compiler; the cpu backend always) and installs it under a prefix; a
# project finds it with find_package(xent) and links xent::xent; a program
# compiled with `pkg-config --cflags --libs xent` links too; both run the
# vendored kernels against float64 (tests/cmake_consumer/consumer.c).
set -euo pipefail
vendor="$PWD/$1"
consumer="$PWD/tests/cmake_consumer"
work="$TEST_TMPDIR/work"
rm -rf "$work"
mkdir -p "$work"
cd "$work"

# Refuses to write over an existing directory, and writes nothing then.
mkdir taken
if "$vendor" taken --kernels 'ce_fwd_f32_i64_mean' 2> refused.txt; then
  echo "FAIL: vendor wrote into an existing directory"
  exit 1
fi
grep -q "exists" refused.txt
[ -z "$(ls -A taken)" ]

"$vendor" tree --kernels 'ce_fwd_f32_i64_mean,ce_bwd_f32_i64_mean'
[ "$(ls tree/kernels/cuda/*.cu | wc -l)" -eq 2 ]
[ "$(ls tree/kernels/hip/*.hip | wc -l)" -eq 2 ]
[ -z "$(ls -A . | grep '^\.xent-vendor' || true)" ]

# No Bazel, no Lua: the build sees stand-ins that fail if called.
mkdir blocked
for tool in bazel bazelisk lua lua5.4 luajit; do
  printf '#!/bin/sh\necho "%s called by the vendored build" >&2\nexit 127\n' "$tool" > "blocked/$tool"
  chmod +x "blocked/$tool"
done
path_without="$work/blocked:$PATH"
PATH="$path_without" cmake -S tree -B build -DCMAKE_INSTALL_PREFIX="$work/prefix" \
  -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_HIP_ARCHITECTURES=gfx90a > configure.log 2>&1 ||
  { cat configure.log; exit 1; }
grep '^-- xent:' configure.log
# The architectures the CUDA backend checks a GPU against: those asked for
# ("90": sm_90's machine code and PTX).
if grep -q '^-- xent: CUDA backend on' configure.log; then
  grep -qx '#define XENT_CUDA_SASS_ARCHS {90}' build/cuda_archs/xent_cuda_archs.h &&
    grep -qx '#define XENT_CUDA_PTX_ARCH 90' build/cuda_archs/xent_cuda_archs.h ||
    { echo "FAIL: xent_cuda_archs.h does not say sm_90:" >&2; cat build/cuda_archs/xent_cuda_archs.h >&2; exit 1; }
fi
# The default list, an "a" architecture with PTX of another, an "f" one
# (the family's: 2), and a list
# CMake would expand itself (refused by name), through the same function.
cat > archs.cmake <<'CMAKE'
include(${TREE}/cmake/xent_cuda_archs.cmake)
xent_cuda_archs_header("80-real;90-real;100-real;120" ${OUT}/default.h)
xent_cuda_archs_header("90a-real;100-virtual" ${OUT}/exact.h)
xent_cuda_archs_header("90a-real;100f-real" ${OUT}/family.h)
CMAKE
cmake -DTREE="$work/tree" -DOUT="$work" -P archs.cmake
grep -qx '#define XENT_CUDA_SASS_ARCHS {80, 90, 100, 120}' default.h && grep -qx '#define XENT_CUDA_PTX_ARCH 120' default.h &&
  grep -qx '#define XENT_CUDA_SASS_EXACT {0, 0, 0, 0}' default.h ||
  { echo "FAIL: the default architectures' header:" >&2; cat default.h >&2; exit 1; }
grep -qx '#define XENT_CUDA_SASS_ARCHS {90}' exact.h && grep -qx '#define XENT_CUDA_SASS_EXACT {1}' exact.h &&
  grep -qx '#define XENT_CUDA_PTX_ARCH 100' exact.h ||
  { echo "FAIL: the 90a-real;100-virtual header:" >&2; cat exact.h >&2; exit 1; }
grep -qx '#define XENT_CUDA_SASS_ARCHS {90, 100}' family.h && grep -qx '#define XENT_CUDA_SASS_EXACT {1, 2}' family.h &&
  grep -qx '#define XENT_CUDA_PTX_ARCH 0' family.h ||
  { echo "FAIL: the 90a-real;100f-real header (an \"f\" architecture is 2):" >&2; cat family.h >&2; exit 1; }
echo 'include(${TREE}/cmake/xent_cuda_archs.cmake)
xent_cuda_archs_header("native" ${OUT}/native.h)' > native.cmake
if cmake -DTREE="$work/tree" -DOUT="$work" -P native.cmake > native.log 2>&1 || ! grep -q "entry 'native'" native.log; then
  echo "FAIL: CMAKE_CUDA_ARCHITECTURES=native is not refused by name:" >&2; cat native.log >&2; exit 1
fi
PATH="$path_without" cmake --build build -j 2 > build.log 2>&1 || { tail -50 build.log; exit 1; }
# Installed under another prefix than the configure-time one, as into a venv,
# a conda environment or ~/.local: every path the package names must follow.
cmake --install build --prefix "$work/elsewhere" > install.log
[ ! -e prefix ]
[ -f elsewhere/include/xent.h ]
[ -f elsewhere/lib/cmake/xent/xentConfig.cmake ]
[ -f elsewhere/lib/pkgconfig/xent.pc ]
if grep -n "$work/prefix" elsewhere/lib/pkgconfig/xent.pc elsewhere/lib/cmake/xent/*.cmake; then
  echo "FAIL: the installed package names the configure-time prefix" >&2
  exit 1
fi

# libxent links no GPU runtime; the backends built are plugins beside it.
if readelf -d elsewhere/lib/libxent.so | grep -E 'NEEDED.*(cudart|amdhip)'; then
  echo "FAIL: the installed libxent links a GPU runtime" >&2
  exit 1
fi
for backend in CUDA HIP; do
  plugin="elsewhere/lib/libxent_${backend,,}.so"
  if grep -q "^-- xent: $backend backend on" configure.log; then
    [ -f "$plugin" ] || { echo "FAIL: $backend is on but $plugin is not installed" >&2; exit 1; }
    nm -D --defined-only "$plugin" | grep -q ' T xent_plugin_open$'
    # The installed libxent finds it beside itself and loads it: a handle
    # of that backend opens, or is refused by the plugin itself (its path
    # first: no device here), not for want of the file or its libraries.
    python3 - "$work/elsewhere/lib/libxent.so" "$work/$plugin" "$backend" <<'PY'
import ctypes, sys
lib = ctypes.CDLL(sys.argv[1])
lib.xent_last_error.restype = ctypes.c_char_p
h = ctypes.c_void_p()
status = lib.xent_create(ctypes.byref(h), {"CUDA": 2, "HIP": 3}[sys.argv[3]])
message = lib.xent_last_error().decode()
assert status == 0 or message.startswith(sys.argv[2] + ": "), (status, message)
print("installed plugin:", "opened a device" if status == 0 else message)
PY
  else
    [ ! -e "$plugin" ] || { echo "FAIL: $backend is off but $plugin is installed" >&2; exit 1; }
  fi
done

# find_package(xent) from another project.
cmake -S "$consumer" -B consumer -DCMAKE_PREFIX_PATH="$work/elsewhere" > consumer.log 2>&1 || { cat consumer.log; exit 1; }
cmake --build consumer > consumer_build.log 2>&1 || { cat consumer_build.log; exit 1; }
./consumer/consumer

# pkg-config from the installed tree; the static link's directories exist.
export PKG_CONFIG_PATH="$work/elsewhere/lib/pkgconfig"
cc -std=c11 -o pc_consumer "$consumer/consumer.c" $(pkg-config --cflags --libs xent) -lm
LD_LIBRARY_PATH="$work/elsewhere/lib" ./pc_consumer
for flag in $(pkg-config --libs --static xent); do
  case "$flag" in
    -L*) [ -d "${flag#-L}" ] || { echo "FAIL: xent.pc names $flag, which is not a directory" >&2; exit 1; } ;;
  esac
done

skipped=""
grep -q '^-- xent: CUDA backend on' configure.log || skipped="$skipped CUDA (no nvcc)"
grep -q '^-- xent: HIP backend on' configure.log || skipped="$skipped HIP (CMake's check_language(HIP) found no usable compiler; docs/INTEGRATION.md, \"CMake: a vendored source tree\")"
if [ -n "$skipped" ]; then
  echo "SKIPPED: the backends of:$skipped (the cpu backend, install, find_package and pkg-config passed)"
fi
echo "1 passed, 0 failed"
