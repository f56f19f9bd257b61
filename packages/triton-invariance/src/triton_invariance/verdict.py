"""When a changed option left the compiled code as it was, say so instead of a plain mismatch.

The compile-options component records an option (fp fusion, a libdevice path), not its effect:
turning fp fusion off for a matmul whose only arithmetic is the `tl.dot` changes the option and
nothing in the binary. When the options are the only changed component and the compiled code of
both sides is recorded and identical -- the binary (cubin / hsaco), or the assembly (PTX /
AMDGCN) where no binary was produced -- the kernel is the same code, so its numerics cannot
differ. (The PTX alone is not enough: with fusion off every `add.f32` is spelled `add.rn.f32`.)
Of an ELF binary only the executable `.text*` sections are compared: a cubin also carries the
ptxas command line (`--fmad=false`) in a note, which is not code. Pure functions; no Triton
import.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Mapping
from pathlib import Path

from triton_invariance.data import InvarianceData

# In order of preference: the binary the GPU runs, then the assembly it was made from.
CODE_KINDS = ("cubin", "hsaco", "ptx", "amdgcn")


def asm_digest(files: Mapping[str, str]) -> str | None:
    """Digest of the compiled code among a compile's files (name -> path), or None."""
    for kind in CODE_KINDS:
        for name, path in files.items():
            if name.endswith(f".{kind}"):
                return asm_digest_of_text(Path(path).read_bytes())
    return None


def asm_digest_of_text(text: str | bytes) -> str:
    """blake2b-128 of the compiled code (an ELF's `.text*` sections, or the whole text)."""
    data = text.encode("utf-8") if isinstance(text, str) else text
    h = hashlib.blake2b(digest_size=16)
    for part in _elf_code_sections(data) or [data]:
        h.update(len(part).to_bytes(8, "little"))
        h.update(part)
    return h.hexdigest()


def _elf_code_sections(data: bytes) -> list[bytes] | None:
    """Name and bytes of each `.text*` section of a little-endian ELF64 file, or None."""
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1 or len(data) < 64:
        return None
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    try:
        headers = [struct.unpack_from("<IIQQQQ", data, shoff + i * shentsize) for i in range(shnum)]
        names_off = headers[shstrndx][4]
    except (struct.error, IndexError):
        return None
    parts = []
    for name_idx, _type, _flags, _addr, offset, size in headers:
        start = names_off + name_idx
        name = data[start : data.index(b"\0", start)] if start < len(data) else b""
        if name.startswith(b".text"):
            parts.append(name + b"\0" + data[offset : offset + size])
    return parts


def identical_code_note(
    baseline: InvarianceData,
    baseline_asm: object,
    current: InvarianceData,
    current_asm: str | None,
) -> str | None:
    """The note that replaces a mismatch when only options changed and the code did not."""
    if baseline.changed_components(current) != ["compile_options_hash"]:
        return None
    if not isinstance(baseline_asm, str) or current_asm is None or baseline_asm != current_asm:
        return None
    detail = baseline.diff_report(current).splitlines()
    options = next((ln.strip() for ln in detail if "compile_options_hash:" in ln), "")
    return f"option changed; compiled code identical (same binary) -- {options}"
