"""What an op does to memory, read from its name: pure, reading or writing.

Memory is the one ordering that data flow does not show: a load must see the stores before it.
`dataflow` chains each writer to the previous writer of its block and each reader to the last
writer before it, so it needs to know which ops read and which write. Anything unknown writes,
so an unknown op keeps its place. Shared-memory buffers are finer-grained: an allocation and the
`memdesc` views only address one (pure), and the ops in `LOCAL_OPS` read or write the buffer an
operand addresses and nothing else. Pure tables and one function; no Triton import.
"""

from __future__ import annotations

from typing import Final

PURE, READ, WRITE = 0, 1, 2

# Binary ops whose two operands may be exchanged without changing any result bit (IEEE add,
# mul, min/max with one NaN policy are commutative; sub, div, pow, remainders are not).
COMMUTATIVE: Final = frozenset(
    {
        "arith.addf",
        "arith.mulf",
        "arith.maxnumf",
        "arith.minnumf",
        "arith.maximumf",
        "arith.minimumf",
        "arith.addi",
        "arith.muli",
        "arith.andi",
        "arith.ori",
        "arith.xori",
        "arith.maxsi",
        "arith.minsi",
        "arith.maxui",
        "arith.minui",
        "tt.mulhiui",
    }
)
_PURE_PREFIXES: Final = ("arith.", "math.", "ub.")
# Instruction-scheduling hints (AMD): they tell LLVM's scheduler what it may move across them, or
# set a wave's issue priority, and touch no memory and no value. Triton 3.6's AMD pipeliner puts
# them between the loads of a K loop; as unknown writers they pinned every load to its print
# position. Pure, they are still hashed (name and attributes) but order nothing.
_SCHEDULING_HINTS: Final = frozenset(
    {
        "rocdl.sched.barrier",
        "rocdl.sched.group.barrier",
        "rocdl.iglp.opt",
        "rocdl.s.setprio",
        "amdgpu.sched_barrier",
        "amdg.instruction_sched_hint",
    }
)
_PURE_OPS: Final = frozenset(
    {
        "tt.splat",
        "tt.unsplat",
        "tt.broadcast",
        "tt.make_range",
        "tt.addptr",
        "tt.expand_dims",
        "tt.reshape",
        "tt.trans",
        "tt.dot",
        "tt.dot_scaled",
        "tt.get_program_id",
        "tt.get_num_programs",
        "tt.fp_to_fp",
        "tt.bitcast",
        "tt.int_to_ptr",
        "tt.ptr_to_int",
        "tt.join",
        "tt.split",
        "tt.cat",
        "tt.clampf",
        "tt.precise_sqrt",
        "tt.precise_divf",
        "tt.mulhiui",
        "tt.histogram",
        "tt.gather",
        "tt.make_tensor_ptr",
        "tt.advance",
        "tt.reduce.return",
        "tt.scan.return",
        "ttg.convert_layout",
        # Groups the async copies whose tokens it takes (data flow); writes nothing itself.
        "ttg.async_commit_group",
        # Moves elements between a thread's registers (AMD): no memory.
        "amdg.in_thread_transpose",
        "scf.yield",
        "scf.condition",
        "tt.return",
    }
)
_READ_OPS: Final = frozenset(
    {"tt.load", "tt.descriptor_load", "tt.descriptor_gather", "ttg.local_load", "amdg.buffer_load"}
)
# A fresh shared-memory buffer, and views that only address part of one: no memory effect.
BUFFER_OPS: Final = frozenset(
    {
        "ttg.local_alloc",
        "ttg.memdesc_index",
        "ttg.memdesc_subslice",
        "ttg.memdesc_subview",
        "ttg.memdesc_trans",
        "ttg.memdesc_reshape",
        "ttg.memdesc_reinterpret",
    }
)
# Ops that write into the shared-memory buffer one of their operands addresses, and nothing else
# a later op of the block could observe except through that buffer.
LOCAL_WRITE_OPS: Final = frozenset(
    {
        "ttg.local_store",
        "ttg.async_copy_global_to_local",
        "amdg.buffer_load_to_local",
        "ttng.async_tma_copy_global_to_local",
        # Frees the buffer: after every read of it, and nothing else.
        "ttg.local_dealloc",
    }
)
LOCAL_OPS: Final = LOCAL_WRITE_OPS | {"ttg.local_load"}
# Ops whose operands are a set: waiting for copies a and b is waiting for b and a.
OPERAND_SETS: Final = frozenset({"ttg.async_wait"})
# Region-holding ops whose own effect is nothing: they are as pure as the ops inside them.
_STRUCTURAL: Final = frozenset({"scf.for", "scf.if", "scf.while", "tt.reduce", "tt.scan"})


def effect_of(name: str) -> int:
    """PURE, READ or WRITE for an op name (unknown ops write: they keep their place)."""
    if name in _PURE_OPS or name in BUFFER_OPS or name.startswith(_PURE_PREFIXES):
        return PURE
    if name in _READ_OPS:
        return READ
    if name in _STRUCTURAL or name in _SCHEDULING_HINTS:
        return PURE
    return WRITE
