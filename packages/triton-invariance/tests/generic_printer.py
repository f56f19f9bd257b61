"""Re-print a TTGIR file in MLIR's generic syntax with Triton's own MLIR (a test oracle).

Run as a script, in a process of its own (the option is process-wide):
``python generic_printer.py FILE KIND ARCH WARP``; writes the module to stdout.

MLIR's printer reads ``--mlir-print-op-generic`` from LLVM's command-line options, which Triton
neither registers nor parses: this registers and parses them by calling two functions of
libtriton through ctypes. Triton 3.9 exports them; Triton 3.6's libtriton keeps them local (in
its ELF symbol table, not its dynamic one), so they are found there and called at the library's
load address. Exit status `MISSING` (with one line on stderr) when neither has them.
"""

from __future__ import annotations

import ctypes
import mmap
import struct
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

MISSING: Final = 3
_REGISTER = "_ZN4mlir27registerAsmPrinterCLOptionsEv"
_PARSE = "LLVMParseCommandLineOptions"
_ANCHOR = "PyInit_libtriton"  # exported by every libtriton: gives the load address
_SHT_SYMTAB = 2


def _symtab_values(path: Path, names: list[str]) -> dict[str, int]:
    """`st_value` of each of `names` found in the ELF64 (little-endian) `.symtab` of `path`."""
    with path.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as elf:
        if elf[:4] != b"\x7fELF" or elf[4] != 2 or elf[5] != 1:
            return {}
        (shoff,) = struct.unpack_from("<Q", elf, 0x28)
        shentsize, shnum = struct.unpack_from("<HH", elf, 0x3A)
        sections = [
            struct.unpack_from("<IIQQQQIIQQ", elf, shoff + i * shentsize) for i in range(shnum)
        ]
        symtab = next((s for s in sections if s[1] == _SHT_SYMTAB), None)
        if symtab is None:
            return {}
        strtab = sections[symtab[6]]
        strings = elf[strtab[4] : strtab[4] + strtab[5]]
        # Each symbol's name starts at its st_name offset (names may share a tail: compare there).
        wanted = [(name, name.encode() + b"\0") for name in names]
        found = {}
        table = elf[symtab[4] : symtab[4] + symtab[5]]
        for st_name, _info, _other, _shndx, value, _size in struct.iter_unpack("<IBBHQQ", table):
            for name, text in wanted:
                if value and strings.startswith(text, st_name):
                    found[name] = value
        return found


def _functions(lib: ctypes.CDLL, path: str) -> tuple[Callable[[], None], Any] | None:
    """(registerAsmPrinterCLOptions, LLVMParseCommandLineOptions) of libtriton, or None."""
    try:
        return getattr(lib, _REGISTER), getattr(lib, _PARSE)
    except AttributeError:
        pass
    values = _symtab_values(Path(path), [_REGISTER, _PARSE, _ANCHOR])
    if len(values) < 3:
        return None
    base = ctypes.cast(getattr(lib, _ANCHOR), ctypes.c_void_p).value
    assert base is not None
    base -= values[_ANCHOR]
    register = ctypes.CFUNCTYPE(None)(base + values[_REGISTER])
    parse = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.POINTER(ctypes.c_char_p), ctypes.c_char_p)(
        base + values[_PARSE]
    )
    return register, parse


def main(argv: list[str]) -> int:
    import triton._C.libtriton as libtriton
    from triton._C.libtriton import ir
    from triton.backends.compiler import GPUTarget
    from triton.compiler.compiler import make_backend

    lib = ctypes.CDLL(libtriton.__file__)
    functions = _functions(lib, libtriton.__file__)
    if functions is None:
        sys.stderr.write(
            f"this libtriton ({libtriton.__file__}) has neither an exported nor a local "
            f"{_REGISTER} / {_PARSE}: no way to set --mlir-print-op-generic\n"
        )
        return MISSING
    register, parse = functions
    register()
    args = (ctypes.c_char_p * 2)(b"print-generic", b"--mlir-print-op-generic")
    parse(2, args, b"")
    context = ir.context()
    ir.load_dialects(context)
    path, kind, arch, warp = argv
    target = GPUTarget(kind, int(arch) if arch.isdigit() else arch, int(warp))
    make_backend(target).load_dialects(context)
    sys.stdout.write(str(ir.parse_mlir_module(path, context)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
