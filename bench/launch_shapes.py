"""A rendered kernel's launch-shape table read back, and the launcher's rule
for picking from it: what the machine-code reports (sass_report.py,
isa_report.py) need to know which block a call of C classes and some rows
launches, and so how many warps or waves an SM or CU holds.

The generated source carries the spec's tune table as
`static const xent_row_shape <kernel>_shapes[] = {{classes, threads a row,
block, on-chip bytes, rows, tile}, ...};` (kernels/device/launch.h), and
xent_pick_launch takes the first shape that serves C (at most its classes;
-1 is any) and the call's rows (at least its rows); the last shape serves
every call. The on-chip shapes serve only the fused and softmax kernels'
on-chip launch, with the smallest cluster (1 to 8 blocks) whose blocks each
hold their slice of the row in the shape's shared memory.
"""

import re

# The rows of the calls the reports are about (a training step's tokens).
ROWS = 16384


def rows_kernel(source, target, key):
    """The name of the rows kernel a generated kernel's source launches: a
    cross-entropy mean and sum variant share one (templates/
    cross_entropy.tmpl, defined under an XENT_DEFINED_<name> guard); every
    other variant's is xent_<target>_<key>_rows."""
    found = re.search(r"^#ifndef XENT_DEFINED_(\w+)$", source, re.M)
    return found.group(1) if found else f"xent_{target}_{key}_rows"


def table(source):
    """[(classes, row_threads, block, on_chip bytes, rows, tile)] of the first
    `_shapes[]` table in a generated kernel's source."""
    found = re.search(r"_shapes\[\] = \{(.*)\};", source)
    if not found:
        raise ValueError("no _shapes[] table in the generated source")
    return [tuple(int(v) for v in t.split(",")) for t in re.findall(r"\{([-\d, ]+)\}", found.group(1))]


def elem_size(key):
    """The bytes of one logit of variant `key` (its dtype's)."""
    return {"bf16": 2, "f16": 2, "f32": 4, "f64": 8}[re.search(r"_(bf16|f16|f32|f64)_", key + "_").group(1)]


def pick(shapes, C, rows=ROWS, elem_size=2, on_chip=False, buffers=2, held=0, max_cluster=8):
    """As xent_pick_launch: (block threads, blocks per cluster, shared bytes
    a block) of the shape a call of C classes and `rows` rows launches
    (cluster and shared bytes 0 off chip); on_chip asks for the on-chip
    launch, None where the table has no on-chip shape serving the call.
    buffers and held: the target's XENT_CHIP_BUFFERS and XENT_CHIP_HELD
    (CUDA's 2 and 0, the defaults; HIP's 1 and 4, with max_cluster 1)."""
    for i, (classes, _group, threads, chip, fewest, *_tile) in enumerate(shapes):
        if i < len(shapes) - 1 and ((classes >= 0 and C > classes) or rows < fewest):
            continue
        if chip == 0:
            return (threads, 0, 0) if not on_chip else None
        if not on_chip:
            continue  # the plain launch skips on-chip shapes
        vecs = C // (16 // elem_size)
        k = 1
        while k <= max_cluster:
            per = -(-vecs // k)
            nbytes = buffers * per * 16  # CUDA: two halves, one row walked, the next loading
            if nbytes <= chip and (held == 0 or per <= threads * held):
                return threads, k, nbytes
            k *= 2
    return None
