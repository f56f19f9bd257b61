"""`InvarianceData`: the numerical-invariance fingerprint of one compiled kernel variant.

The record keeps the *canonical components* the hashes are computed from (per-op lines, per-op
layout references, layout definitions, the dtype signature and the hardware config), not only the
hashes. That costs a few kilobytes per baseline and buys two things:

* a mismatch report can name the first op (index, before, after) that changed, and
* every hash is re-derived on load, so a hand-edited or truncated baseline is rejected instead of
  silently comparing garbage.

All hashes are blake2b content hashes of UTF-8 text (never Python's `hash()`, never pointers), so a
fingerprint computed on one machine compares equal to one computed on another.
"""

from __future__ import annotations

import functools
import hashlib
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from triton_invariance.dataflow import line_hashes
from triton_invariance.dotdiff import dot_difference

FORMAT_VERSION = 2
"""Version of the serialised form; bumped whenever the canonicalisation or the hashing changes.

2: the computation DAG is hashed as a data-flow graph (`triton_invariance.dataflow`) and the
layout component as the multiset of each op's layouts; 1 hashed the op sequence."""

_DIGEST_BYTES = 16
_T = TypeVar("_T")
_SEP = "\x1f"  # unit separator: cannot occur in canonical MLIR text, so joins are unambiguous


class InvalidInvarianceDataError(ValueError):
    """A serialised fingerprint is missing a key, has a bad value or a foreign format version."""


def content_hash(parts: Iterable[str]) -> str:
    """Blake2b (128 bit, hex) of `parts`, each part terminated so that boundaries count."""
    # Joined and hashed at once: the same bytes as part by part (the separator is one byte).
    data = "".join([part + _SEP for part in parts]).encode("utf-8")
    return hashlib.blake2b(data, digest_size=_DIGEST_BYTES).hexdigest()


@dataclass(frozen=True)
class HwConfig:
    """Hardware-facing module attributes of a TTGIR module.

    `target` is Triton's target string (``cuda:80``, ``hip:gfx942``). `extra` holds every other
    module attribute (sorted ``(name, canonical value)`` pairs) so that nothing the compiler
    recorded at module level is silently left out of the fingerprint.
    """

    target: str
    num_warps: int
    num_ctas: int
    threads_per_warp: int
    extra: tuple[tuple[str, str], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "target": self.target,
            "num_warps": self.num_warps,
            "num_ctas": self.num_ctas,
            "threads_per_warp": self.threads_per_warp,
            "extra": dict(self.extra),
        }

    @classmethod
    def from_dict(cls, d: object, where: str = "hw_config") -> HwConfig:
        """Inverse of `to_dict`; raises `InvalidInvarianceDataError` naming the bad key path."""
        m = _require_mapping(d, where)
        extra = _str_pairs(m.get("extra", {}), f"{where}.extra")
        return cls(
            target=_require(m, "target", str, where),
            num_warps=_require(m, "num_warps", int, where),
            num_ctas=_require(m, "num_ctas", int, where),
            threads_per_warp=_require(m, "threads_per_warp", int, where),
            extra=tuple(sorted(extra)),
        )

    def canonical_parts(self) -> list[str]:
        """The strings hashed into `hw_config_hash`."""
        return [
            f"target={self.target}",
            f"num_warps={self.num_warps}",
            f"num_ctas={self.num_ctas}",
            f"threads_per_warp={self.threads_per_warp}",
            *(f"{k}={v}" for k, v in self.extra),
        ]


@dataclass(frozen=True)
class InvarianceData:
    """Fingerprint of one TTGIR module, split into the spec's components.

    Components (each with its own hash, so a report says *which* one changed):

    * computation DAG (`ops`): one canonical line per op / block header, in program order, with SSA
      values renumbered by first appearance (so data flow is kept and names are not), locations
      removed, element types and shapes kept, layout encodings cut out into `op_layouts`.
    * dtype signature (`dtype_signature`): the entry function's argument and result types.
    * layout (`layouts`, `op_layouts`): the fully resolved definition of every encoding / memory
      space used by a type (alias names do not matter, their content does), and for each op which
      of them its types reference.
    * hardware config (`hw_config`): target, num-warps, num-ctas, threads-per-warp and the other
      module attributes.
    * compile options (`compile_options`): the options that change numerics after TTGIR
      (`triton_invariance.options`), ``(name, canonical value)`` pairs; None when the fingerprint
      was computed from TTGIR alone or read from a baseline that predates the component. A
      component that one side lacks is not compared (`comparison_notes` says so).
      `compile_env` (the knob variables that were set) is recorded to explain a change; it is
      not hashed: only the effective options are.

    `kernel_name` is metadata (it names the baseline file); it is deliberately not part of
    `fingerprint`, because renaming a kernel does not change what it computes.
    """

    kernel_name: str
    dtype_signature: str
    hw_config: HwConfig
    ops: tuple[str, ...]
    op_layouts: tuple[str, ...]
    layouts: tuple[str, ...]
    version: int = field(default=FORMAT_VERSION)
    compile_options: tuple[tuple[str, str], ...] | None = None
    compile_env: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        if len(self.ops) != len(self.op_layouts):
            raise InvalidInvarianceDataError(
                f"ops and op_layouts must have the same length "
                f"(got {len(self.ops)} and {len(self.op_layouts)})"
            )

    # -- hashes ---------------------------------------------------------------------------------
    @functools.cached_property
    def _dataflow(self) -> tuple[str, list[str]]:
        # The data-flow graph needs the MLIR parser (~10 ms to import): only when a hash is
        # asked for, not for `triton-invariance --help` or a listing.

        return line_hashes(self.ops)

    @property
    def computation_dag_hash(self) -> str:
        """Hash of the data-flow graph: op kinds, data flow, attributes, constants, types.

        Not of the op order: independent ops may be printed in any order and commutative ops'
        operands in either (`triton_invariance.dataflow`).
        """
        return content_hash(["dag", self._dataflow[0]])

    def op_hashes(self) -> list[str]:
        """The structural hash of each line of `ops` ("" for region markers, block headers)."""
        return list(self._dataflow[1])

    def _layout_uses(self) -> list[str]:
        """Per op that uses layouts: the sorted definitions it uses (refs resolved)."""
        return self._layout_uses_of([refs for refs in self.op_layouts if refs])

    def _layout_uses_of(self, op_refs: list[str]) -> list[str]:
        uses = []
        for refs in op_refs:
            resolved = set()
            for ref in refs.split(","):
                index = ref[1:]
                if ref.startswith("#") and index.isdigit() and int(index) < len(self.layouts):
                    resolved.add(self.layouts[int(index)])
                else:
                    resolved.add(ref)  # not a reference this package writes: hashed as is
            uses.append("\x1e".join(sorted(resolved)))
        return uses

    @property
    def dtype_signature_hash(self) -> str:
        """Hash of `dtype_signature` (the readable string is what the spec stores)."""
        return content_hash(["dtype", self.dtype_signature])

    @property
    def layout_hash(self) -> str:
        """Hash of the resolved encodings and of the multiset of each op's encodings.

        Independent of op order and of the numbering of layouts; an op that uses no layout
        does not contribute.
        """
        return content_hash(
            ["layout", *sorted(set(self.layouts)), "uses", *sorted(self._layout_uses())]
        )

    @property
    def hw_config_hash(self) -> str:
        """Hash of the hardware config."""
        return content_hash(["hw", *self.hw_config.canonical_parts()])

    @property
    def compile_options_hash(self) -> str | None:
        """Hash of the numerics-relevant compile options; None when they were not recorded."""
        if self.compile_options is None:
            return None
        return content_hash(["options", *(f"{k}={v}" for k, v in sorted(self.compile_options))])

    @property
    def fingerprint(self) -> str:
        """Combined hash of all components (and the format version)."""
        options = self.compile_options_hash
        return content_hash(
            [
                f"v{self.version}",
                self.computation_dag_hash,
                self.dtype_signature_hash,
                self.layout_hash,
                self.hw_config_hash,
                *([] if options is None else [options]),
            ]
        )

    def component_hashes(self) -> dict[str, str]:
        """Name → hash of every recorded component, in report order."""
        hashes = {
            "computation_dag_hash": self.computation_dag_hash,
            "dtype_signature": self.dtype_signature_hash,
            "layout_hash": self.layout_hash,
            "hw_config_hash": self.hw_config_hash,
        }
        options = self.compile_options_hash
        if options is not None:
            hashes["compile_options_hash"] = options
        return hashes

    # -- (de)serialisation -----------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form: the spec's hash fields plus the components they derive from."""
        return {
            "version": self.version,
            "kernel_name": self.kernel_name,
            "fingerprint": self.fingerprint,
            "computation_dag_hash": self.computation_dag_hash,
            "dtype_signature": self.dtype_signature,
            "layout_hash": self.layout_hash,
            "hw_config_hash": self.hw_config_hash,
            "hw_config": self.hw_config.to_dict(),
            "ops": list(self.ops),
            "op_layouts": list(self.op_layouts),
            "layouts": list(self.layouts),
            **(
                {}
                if self.compile_options is None
                else {
                    "compile_options": dict(self.compile_options),
                    "compile_options_hash": self.compile_options_hash,
                }
            ),
            **({"compile_env": dict(self.compile_env)} if self.compile_env else {}),
        }

    @classmethod
    def from_dict(cls, d: object) -> InvarianceData:
        """Inverse of `to_dict`.

        Raises `InvalidInvarianceDataError` naming the missing or bad key, a format version other
        than `FORMAT_VERSION`, or a stored hash that does not match the stored components.
        """
        m = _require_mapping(d, "invariance")
        version = _require(m, "version", int, "invariance")
        if version != FORMAT_VERSION:
            raise InvalidInvarianceDataError(
                f"invariance.version: format version {version} is not supported "
                f"(this triton-invariance reads version {FORMAT_VERSION}); "
                f"re-commit the baseline with TRITON_INVARIANCE_COMMIT=1"
            )
        data = cls(
            kernel_name=_require(m, "kernel_name", str, "invariance"),
            dtype_signature=_require(m, "dtype_signature", str, "invariance"),
            hw_config=HwConfig.from_dict(m.get("hw_config"), "invariance.hw_config")
            if "hw_config" in m
            else _missing("invariance", "hw_config"),
            ops=_require_str_list(m, "ops"),
            op_layouts=_require_str_list(m, "op_layouts"),
            layouts=_require_str_list(m, "layouts"),
            version=version,
            compile_options=(
                _str_pairs(m["compile_options"], "invariance.compile_options")
                if "compile_options" in m
                else None
            ),
            compile_env=_str_pairs(m.get("compile_env", {}), "invariance.compile_env"),
        )
        checked = ["computation_dag_hash", "layout_hash", "hw_config_hash", "fingerprint"]
        if data.compile_options is not None:
            checked.insert(-1, "compile_options_hash")
        for key in checked:
            stored = _require(m, key, str, "invariance")
            actual = getattr(data, key)
            if stored != actual:
                raise InvalidInvarianceDataError(
                    f"invariance.{key}: stored {stored} but the stored components hash to "
                    f"{actual}; the baseline was edited or is corrupt"
                )
        return data

    # -- reporting --------------------------------------------------------------------------------
    def changed_components(self, other: InvarianceData) -> list[str]:
        """Names of the components whose hashes differ between `self` and `other`.

        A component only one side recorded (compile options of an older baseline) is not
        compared; `comparison_notes` says so.
        """
        mine, theirs = self.component_hashes(), other.component_hashes()
        return [name for name in mine if name in theirs and mine[name] != theirs[name]]

    def matches(self, other: InvarianceData) -> bool:
        """Whether every component both sides recorded is equal (the verdict of a compare)."""
        return not self.changed_components(other)

    def comparison_notes(self, other: InvarianceData) -> list[str]:
        """What a comparison of `self` (baseline) with `other` (current) could not check."""
        if self.compile_options is None and other.compile_options is not None:
            return [
                "note: the baseline records no compile options (committed from TTGIR alone or "
                "by an older triton-invariance); they were not compared -- re-commit to record "
                "them"
            ]
        if self.compile_options is not None and other.compile_options is None:
            return [
                "note: the current fingerprint records no compile options (computed from TTGIR "
                "alone); they were not compared"
            ]
        return []

    def diff_report(self, other: InvarianceData) -> str:
        """Human-readable account of how `other` (current) differs from `self` (baseline).

        Names every changed component and, for the DAG and the layouts, the first differing op
        (index, before, after).
        """
        changed = self.changed_components(other)
        notes = self.comparison_notes(other)
        if not changed:
            return "\n".join(
                [f"{self.kernel_name}: fingerprints match ({self.fingerprint})", *notes]
            )
        lines = [
            f"{self.kernel_name}: fingerprint {self.fingerprint} -> {other.fingerprint}; "
            f"changed: {', '.join(changed)}"
        ]
        if "computation_dag_hash" in changed:
            lines.append("  computation_dag_hash: " + self._dag_difference(other))
        if "dtype_signature" in changed:
            lines.append(
                f"  dtype_signature: before {self.dtype_signature!r}, "
                f"after {other.dtype_signature!r}"
            )
        if "layout_hash" in changed:
            lines.append("  layout_hash: " + self._layout_difference(other))
        if "hw_config_hash" in changed:
            before, after = self.hw_config.to_dict(), other.hw_config.to_dict()
            diffs = [
                f"{k}: {before.get(k)!r} -> {after.get(k)!r}"
                for k in sorted(before.keys() | after.keys())
                if before.get(k) != after.get(k)
            ]
            lines.append("  hw_config_hash: " + "; ".join(diffs))
        if "compile_options_hash" in changed:
            lines.append("  compile_options_hash: " + self._options_difference(other))
        lines.extend(f"  {note}" for note in notes)
        return "\n".join(lines)

    def _options_difference(self, other: InvarianceData) -> str:
        before, after = dict(self.compile_options or ()), dict(other.compile_options or ())
        diffs = [
            f"{k}: {before.get(k, '<unset>')} -> {after.get(k, '<unset>')}"
            for k in sorted(before.keys() | after.keys())
            if before.get(k) != after.get(k)
        ]
        text = "; ".join(diffs)
        if self.compile_env != other.compile_env:
            text += (
                f" (environment knobs: baseline {_pairs_text(self.compile_env)}, "
                f"now {_pairs_text(other.compile_env)})"
            )
        return text

    def _dag_difference(self, other: InvarianceData) -> str:
        """The first op (in program order) of each side that has no counterpart in the other.

        Ops inside a changed region and users of a changed value change too; the first changed
        op that holds no region is the one a reader acts on (its users come after it).
        """
        i = _first_unmatched(self.ops, self.op_hashes(), other.op_hashes())
        j = _first_unmatched(other.ops, other.op_hashes(), self.op_hashes())
        before = self.ops[i] if i is not None else "<none>"
        after = other.ops[j] if j is not None else "<none>"
        n, m = len(self.ops), len(other.ops)
        counts = f" ({n} -> {m} ops)" if n != m else ""
        where = f"op {i}" if i is not None else "no op of the baseline"
        if j is not None and j != i:
            where += f" (op {j} now)"
        first = f"first difference at {where}{counts}: before `{before}`, after `{after}`"
        dot = dot_difference(self.ops, other.ops)
        return first if dot is None else f"{dot}; {first}"

    def _layout_difference(self, other: InvarianceData) -> str:
        theirs = set(other.layouts)
        changed = next((k for k, d in enumerate(self.layouts) if d not in theirs), None)
        if changed is not None or set(self.layouts) != theirs:
            mine = set(self.layouts)
            before = self.layouts[changed] if changed is not None else "<none>"
            after = next((d for d in other.layouts if d not in mine), "<none>")
            where = f"layout {changed}: before `{before}`, after `{after}`"
            # Point at the first op that uses the changed layout, which is what a reader acts on.
            ref = f"#{changed}"
            user = next(
                (i for i, refs in enumerate(self.op_layouts) if ref in refs.split(",")), None
            )
            if user is not None and user < len(self.ops):
                where += f"; first used by op {user}: {self.ops[user]}"
            return where
        # Same definitions, used differently: the first op whose layouts have no counterpart.
        uses = Counter(other._layout_uses())
        for i, refs in enumerate(self.op_layouts):
            if not refs:
                continue
            use = self._resolved_use(refs)
            if uses[use] > 0:
                uses[use] -= 1
                continue
            return f"op {i} `{self.ops[i]}` now uses its layouts [{refs}] differently"
        return "an op of the current kernel uses layouts no baseline op uses"

    def _resolved_use(self, refs: str) -> str:
        return self._layout_uses_of([refs])[0]


def _first_unmatched(ops: tuple[str, ...], mine: list[str], theirs: list[str]) -> int | None:
    available = Counter(h for h in theirs if h)
    unmatched = []
    for i, h in enumerate(mine):
        if not h:
            continue
        if available[h] > 0:
            available[h] -= 1
        else:
            unmatched.append(i)
    leaves = [i for i in unmatched if not _holds_region(ops, i)]
    return next(iter(leaves or unmatched), None)


def _holds_region(ops: tuple[str, ...], i: int) -> bool:
    return i + 1 < len(ops) and ops[i + 1].strip() == "region 0"


def _pairs_text(pairs: tuple[tuple[str, str], ...]) -> str:
    return ", ".join(f"{k}={v}" for k, v in pairs) or "none set"


def _str_pairs(value: object, where: str) -> tuple[tuple[str, str], ...]:
    m = _require_mapping(value, where)
    for k, v in m.items():
        if not isinstance(k, str) or not isinstance(v, str):
            raise InvalidInvarianceDataError(
                f"{where}: expected string keys and string values, got {k!r:.80}: {v!r:.80}"
            )
    return tuple(m.items())


def _require_mapping(d: object, where: str) -> Mapping[str, Any]:
    if not isinstance(d, Mapping):
        raise InvalidInvarianceDataError(f"{where}: expected an object, got {type(d).__name__}")
    return d


def _missing(where: str, key: str) -> Any:
    raise InvalidInvarianceDataError(f"{where}.{key}: missing")


def _require(m: Mapping[str, Any], key: str, typ: type[_T], where: str) -> _T:
    if key not in m:
        _missing(where, key)
    value = m[key]
    # bool is an int subclass; a version or a warp count of `true` is a corrupt file, not 1.
    if not isinstance(value, typ) or (typ is int and isinstance(value, bool)):
        raise InvalidInvarianceDataError(
            f"{where}.{key}: expected {typ.__name__}, got {type(value).__name__} ({value!r})"
        )
    return value


def _require_str_list(m: Mapping[str, Any], key: str) -> tuple[str, ...]:
    value = _require(m, key, list, "invariance")
    for i, item in enumerate(value):
        if not isinstance(item, str):
            raise InvalidInvarianceDataError(
                f"invariance.{key}[{i}]: expected str, got {type(item).__name__}"
            )
    return tuple(value)
