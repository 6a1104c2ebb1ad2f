/* Host-side element access for every logits dtype: half and bfloat16 are
   converted with round-to-nearest-even, as the device code does. */
#ifndef XENT_NUMERIC_H
#define XENT_NUMERIC_H

#include <stdint.h>

#include "xent.h"

#ifdef __cplusplus
extern "C" {
#endif

float xent_f16_to_float(uint16_t bits);
uint16_t xent_float_to_f16(float v);
float xent_bf16_to_float(uint16_t bits);
uint16_t xent_float_to_bf16(float v);

/* Element i of an array of `dtype`, as double (exact for every dtype). */
double xent_load(xent_dtype dtype, const void* base, int64_t i);
/* Stores v rounded to `dtype` (f16/bf16 round through float, as on device). */
void xent_store(xent_dtype dtype, void* base, int64_t i, double v);
/* The accumulation type of a dtype: f64 for XENT_F64, else f32. */
xent_dtype xent_acc_dtype(xent_dtype dtype);
/* Label i as int64. */
int64_t xent_load_label(xent_label_type type, const void* base, int64_t i);

#ifdef __cplusplus
}
#endif

#endif
