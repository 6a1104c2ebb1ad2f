/* The ISA-version device library of one AMD GPU target: its major, minor
   and stepping as one number (gfx942: 9.4.2 -> 9402; gfx90a: 9.0.10 -> 9010),
   which ROCm's device libraries (ockl, ocml) read to choose code for the
   target. ROCm defines it the same way, one file per target
   (oclc/src/isa_version_<target>.cl in ROCm-Device-Libs). Debian's device
   libraries (ROCm 5.2) stop at gfx940, so compile.bzl's hip_device_libs
   builds this for the targets they lack (gfx942: MI300X, MI300A, MI325X),
   with the number given as XENT_OCLC_ISA_VERSION. */
__constant const int __oclc_ISA_version = XENT_OCLC_ISA_VERSION;
