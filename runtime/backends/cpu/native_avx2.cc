// The cpu backend's own code (native_rows.cc) for x86-64 CPUs with AVX2 and
// FMA: eight floats a vector where plain x86-64 has four. Built with
// -mavx2 -mfma; native.c calls it only where the CPU has both.
#define XENT_NATIVE_ISA avx2
#include "runtime/backends/cpu/native_rows.cc"
