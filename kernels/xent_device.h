// The device library every generated kernel includes, one concern a header.
// A unit defines XENT_TARGET_CUDA or XENT_TARGET_HIP first (and XENT_EMU
// for the emulator); docs/ARCHITECTURE.md draws the path to a kernel.
#pragma once

#include "device/target.h"
#include "device/variant.h"
#include "device/rows.h"
#include "device/launch.h"
#include "device/vectors.h"
#include "device/walks.h"
#include "device/pipeline.h"
#include "device/convert.h"
#include "device/exp_log.h"
#include "device/reduce.h"
#include "cross_entropy/token_stats.h"
#include "cross_entropy/vocab_parallel.h"
