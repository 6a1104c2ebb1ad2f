/* The kernels' own conversions between float and the 16-bit types (the
   device library, kernels/device/convert.h, as the emulator compiles it: the code the HIP
   rendering runs on an AMD GPU, and the CUDA rendering's below sm_80 or
   under the emulator) against the CPU reference's (runtime/numeric.c, which
   reference_vs_torch_test holds bit for bit to PyTorch's and NumPy's):
   xent_store_bf16 and xent_store_f16 one value at a time and two at a time
   into a word (xent_store_bf16x2, xent_store_f16x2: the first in the low
   half), a 16-byte vector narrowed (xent_narrow16 with xent_to_<dtype>) and
   widened (xent_widen_bf16, xent_widen_f16). The floats: every bfloat16's
   neighbourhood (each top half with low halves at and around the rounding
   ties), so rounding to nearest even, the largest finite values, overflow
   to infinity, and NaNs of every payload shape, which must stay NaNs (quiet,
   with their sign): a NaN whose payload is only in the low half rounds to
   infinity, and one with every payload bit set carries into the sign bit,
   if the NaN case is left out.
   Built once per target (tests/BUILD: XENT_TARGET_CUDA, XENT_TARGET_HIP). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "xent_device.h"
#include "runtime/numeric.h"

static int failures = 0;

static void fail(const char* what, uint32_t in, uint32_t got, uint32_t want) {
  if (++failures <= 20) printf("FAIL %s: input 0x%08x gave 0x%04x, want 0x%04x\n", what, in, got, want);
}

static float from_bits(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static uint32_t bits_of(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}

/* A NaN float's 16-bit result is right when it is a NaN of that type with
   the quiet bit set and the input's sign; any other float's when it equals
   the reference's. */
static int bf16_ok(uint32_t in, uint16_t got) {
  if (isnan(from_bits(in))) return (got & 0x7f80u) == 0x7f80u && (got & 0x0040u) && (got >> 15) == (in >> 31);
  return got == xent_float_to_bf16(from_bits(in));
}

static int f16_ok(uint32_t in, uint16_t got) {
  if (isnan(from_bits(in))) return (got & 0x7c00u) == 0x7c00u && (got & 0x0200u) && (got >> 15) == (in >> 31);
  return got == xent_float_to_f16(from_bits(in));
}

int main(void) {
  static const uint32_t lows[] = {0x0000, 0x0001, 0x3fff, 0x4000, 0x7ffe, 0x7fff, 0x8000, 0x8001, 0xbfff, 0xc000,
                                  0xfffe, 0xffff};
  const int nlows = (int)(sizeof lows / sizeof lows[0]);
  long checked = 0;
  for (uint32_t hi = 0; hi < 0x10000u; ++hi) {
    for (int l = 0; l < nlows; ++l) {
      const uint32_t in = hi << 16 | lows[l];
      const uint32_t other = (hi ^ 0x8001u) << 16 | lows[nlows - 1 - l];  // a second value for the pairs
      const float f = from_bits(in), g = from_bits(other);
      const uint16_t b = xent_store_bf16(f), h = xent_store_f16(f);
      if (!bf16_ok(in, b)) fail("xent_store_bf16", in, b, xent_float_to_bf16(f));
      if (!f16_ok(in, h)) fail("xent_store_f16", in, h, xent_float_to_f16(f));
      const uint32_t pb = xent_store_bf16x2(f, g), ph = xent_store_f16x2(f, g);
      if ((pb & 0xffffu) != b || (pb >> 16) != xent_store_bf16(g)) fail("xent_store_bf16x2 (lo, hi)", in, pb, b);
      if ((ph & 0xffffu) != h || (ph >> 16) != xent_store_f16(g)) fail("xent_store_f16x2 (lo, hi)", in, ph, h);
      checked += 2;
    }
  }

  /* Vectors: eight floats narrowed, element k at bytes 2k and 2k + 1; every
     16-bit pattern widened, each element as the reference reads it. */
  uint64_t state = 12345;
  for (int rep = 0; rep < 20000; ++rep) {
    float d[8];
    for (int k = 0; k < 8; ++k) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      d[k] = from_bits((uint32_t)(state >> 32));
    }
    const xent_vec16<uint16_t> vb = xent_narrow16<uint16_t>(d, xent_to_bf16());
    const xent_vec16<uint16_t> vh = xent_narrow16<uint16_t>(d, xent_to_f16());
    unsigned char bytes[16];
    memcpy(bytes, &vb, 16);
    for (int k = 0; k < 8; ++k) {
      const uint16_t at = (uint16_t)(bytes[2 * k] | bytes[2 * k + 1] << 8);
      if (at != xent_store_bf16(d[k])) fail("xent_narrow16 bf16 (element order)", bits_of(d[k]), at, xent_store_bf16(d[k]));
      if (vh.e[k] != xent_store_f16(d[k])) fail("xent_narrow16 f16", bits_of(d[k]), vh.e[k], xent_store_f16(d[k]));
    }
    const xent_vec16<float> vf = xent_narrow16<float>(*(const float(*)[4])d, xent_to_f32());
    if (memcmp(&vf, d, 16) != 0) fail("xent_narrow16 f32", bits_of(d[0]), bits_of(vf.e[0]), bits_of(d[0]));
  }
  for (uint32_t first = 0; first < 0x10000u; first += 8) {
    xent_vec16<uint16_t> c;
    for (int k = 0; k < 8; ++k) c.e[k] = (uint16_t)(first + (uint32_t)k);
    float xb[8], xh[8];
    xent_widen_bf16(c, xb);
    xent_widen_f16(c, xh);
    for (int k = 0; k < 8; ++k) {
      const float wb = xent_bf16_to_float(c.e[k]), wh = xent_f16_to_float(c.e[k]);
      if (bits_of(xb[k]) != bits_of(wb)) fail("xent_widen_bf16", c.e[k], bits_of(xb[k]) >> 16, bits_of(wb) >> 16);
      if (isnan(wh) ? !isnan(xh[k]) : bits_of(xh[k]) != bits_of(wh)) fail("xent_widen_f16", c.e[k], 0, 0);
    }
    checked += 16;
  }
  printf("%ld conversions checked, %d failed\n", checked, failures);
  return failures ? 1 : 0;
}
