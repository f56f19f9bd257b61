"""The step lines of mainstream training frameworks, recognised line by line (`step_time: auto`).

Each `Format` reads a block of complete lines (ANSI colours already stripped, `\\r` already a
line end) and returns `Reading`s: a step line (with the step time when the framework prints
one), or a line that only carries a loss or grad norm. Values stay raw text here; the caller
reads them (`values.parse_number`), so an unreadable value stays *unknown*.

What each format looks like, as the framework's own logging code prints it:

* `megatron`  `iteration 10/ 100 | ... elapsed time per iteration (ms): 412.3 | ... lm loss:
  2.3E+00 | ... grad norm: 0.8 | ... number of nan iterations: 0 |` (per-iteration mean over
  the log interval).
* `nemo`      its Lightning bar: `10/100 [00:12<01:48, reduced_train_loss=6.23, global_step=9,
  ..., train_step_timing in s=0.85]`.
* `deepspeed` `steps: 10 loss: 2.3 iter time (s): 0.41 samples/sec: 78.0` (pipeline engine)
  and `[Rank 0] step=10, skipped=0, lr=[...]` (no time: timed by arrival).
* `nanogpt`   `iter 8: loss 2.31, time 16.67ms, mfu 4.2%` (its eval line `step 0: train loss
  ..., val loss ...` is claimed and left unread).
* `fairseq`   `epoch 001:  100 / 1000 loss=4.2, ..., ups=3.1, ..., num_updates=100, gnorm=1.2`,
  `epoch 001 | loss 4.2 | ... | ups 3.1 | ... | num_updates 500 | ... | wall 12`, and the
  json log format (`{"epoch": 1, ..., "loss": "4.2", "ups": "3.1", "num_updates": "100"}`);
  the step time is `1000 / ups` ms (updates per second over the log interval).
* `torchtitan` `step:  1  loss: 12.2345  grad_norm: 3.1  memory: 12.3GiB(15%)  tps: 1,234 ...`
  (no step time: timed by arrival).
* `jsonl`     one JSON object with `step`, optionally `step_time_ms`/`step_time_s`, `loss`,
  `grad_norm` (aorta's own fsdp workload prints it).
* `hf` / `lightning`  tqdm bars (`12/100 [00:03<00:20, 4.20it/s]`, rate or `s/it`; Lightning's
  start `Epoch N:` and carry `train_loss=` in the postfix), and the Hugging Face Trainer's log
  dicts (`{'loss': 2.3, 'grad_norm': 1.1, 'learning_rate': 5e-05, 'epoch': 0.1}`: loss lines).
* `plain`     `step 10 loss: 2.3` / `Step 10/100, loss=2.3, time 41.2 ms` / `iteration 10 ...`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Final


@dataclass(frozen=True)
class Reading:
    """One recognised line: a step (`is_step`) or a line that only carries values."""

    pos: int  # offset of the line's start in the block
    name: str  # the format that read it
    is_step: bool
    step: int | None = None
    time_ms: float | None = None  # the step time the line printed; None: not printed
    loss: str | None = None  # raw text of the loss value, as printed
    grad_norm: str | None = None
    total: int | None = None  # a progress bar's total (its `N/total`)


@dataclass(frozen=True)
class Format:
    """A log format: lower-case needles (one must be in the block) and its line reader."""

    name: str
    needles: tuple[str, ...]
    read: Callable[[str], list[Reading]]


def line_start(text: str, pos: int) -> int:
    """Offset of the start of the line holding `pos`."""
    return text.rfind("\n", 0, pos) + 1


def _search(pattern: re.Pattern[str], text: str) -> str | None:
    match = pattern.search(text)
    return match.group(1) if match is not None else None


def _seconds_to_ms(raw: str | None) -> float | None:
    try:
        return float(raw) * 1000.0 if raw is not None else None
    except ValueError:
        return None


def _float(raw: str | None) -> float | None:
    try:
        return float(raw) if raw is not None else None
    except ValueError:
        return None


def _int(raw: str | None) -> int | None:
    number = _float(raw)
    return int(number) if number is not None and number.is_integer() else None


# A value: a tensor repr (which holds commas), a number up to the next separator, or a
# non-finite word (`nan`, `-inf`, `Infinity`; not `info`). So `loss scale: 1.0` is not read
# as a loss `scale:`, and `loss function` is no value at all.
_VALUE: Final = (
    r"(tensor\([^)\n]*\)|['\"]?[-+]?(?:(?:\d|\.\d)[^\s|,;\]}]*|(?i:nan|inf(?:inity)?)\b['\"]?))"
)


# --- Megatron-LM ----------------------------------------------------------------------------

_MEGATRON: Final = re.compile(
    r"\biteration\s+(?P<step>\d+)\s*/\s*\S+\s*\|[^\n]*?"
    r"elapsed time per iteration \(ms\):\s*(?P<time>[0-9.]+)[^\n]*"
)
_MEGATRON_LM_LOSS: Final = re.compile(r"\blm loss:\s*" + _VALUE)
_MEGATRON_LOSS: Final = re.compile(r"\bloss:\s*" + _VALUE)
_MEGATRON_GRAD: Final = re.compile(r"\bgrad norm:\s*" + _VALUE)


def _megatron(text: str) -> list[Reading]:
    found = []
    for match in _MEGATRON.finditer(text):
        line = match.group(0)
        found.append(
            Reading(
                line_start(text, match.start()),
                "megatron",
                True,
                int(match.group("step")),
                _float(match.group("time")),
                _search(_MEGATRON_LM_LOSS, line) or _search(_MEGATRON_LOSS, line),
                _search(_MEGATRON_GRAD, line),
            )
        )
    return found


# --- tqdm bars: NeMo, Hugging Face Trainer, PyTorch Lightning -------------------------------

_BAR: Final = re.compile(r"(?P<step>\d+)/(?P<total>\d+) \[(?P<body>[^\]\n]*)\]")
_BAR_RATE: Final = re.compile(r"(?P<rate>[0-9.]+)\s?(?P<unit>it/s|s/it)")
_BAR_LOSS: Final = re.compile(r"\b(?:train_)?loss(?:_step)?=" + _VALUE)
# Bars that are not training steps: data loading, evaluation, checkpoint shards.
_NOT_TRAINING: Final = re.compile(
    r"(?i)valid|sanity|test|predict|evaluat|load|map|download|token|generat|shard|filter"
)
_NEMO_TIME: Final = re.compile(r"train_step_timing in s=" + _VALUE)
_NEMO_LOSS: Final = re.compile(r"\breduced_train_loss=" + _VALUE)
_NEMO_STEP: Final = re.compile(r"\bglobal_step=" + _VALUE)


def _bars(text: str) -> Iterator[tuple[re.Match[str], int, str]]:
    """Training progress bars: (match, line start, description before the bar)."""
    for match in _BAR.finditer(text):
        start = line_start(text, match.start())
        description = text[start : match.start()]
        if not _NOT_TRAINING.search(description):
            yield match, start, description


def _nemo(text: str) -> list[Reading]:
    found = []
    for match, start, _ in _bars(text):
        body = match.group("body")
        time_ms = _seconds_to_ms(_search(_NEMO_TIME, body))
        if time_ms is None:
            continue
        step = _int(_search(_NEMO_STEP, body))
        found.append(
            Reading(
                start,
                "nemo",
                True,
                step if step is not None else int(match.group("step")),
                time_ms,
                _search(_NEMO_LOSS, body),
                total=int(match.group("total")),
            )
        )
    return found


def _tqdm(text: str) -> list[Reading]:
    found = []
    for match, start, description in _bars(text):
        body = match.group("body")
        rate_match = _BAR_RATE.search(body)
        rate = _float(rate_match.group("rate")) if rate_match is not None else None
        step = int(match.group("step"))
        if rate_match is None or not rate or step == 0:
            continue  # the first bar has no rate yet
        per_step = 1000.0 / rate if rate_match.group("unit") == "it/s" else rate * 1000.0
        name = "lightning" if description.lstrip().startswith("Epoch") else "hf"
        total = int(match.group("total"))
        loss = _search(_BAR_LOSS, body)
        found.append(Reading(start, name, True, step, per_step, loss, total=total))
    return found


_HF_DICT: Final = re.compile(r"\{[^\n]*?['\"](?:loss|train_loss|grad_norm)['\"][^\n]*\}")
_HF_LOSS: Final = re.compile(r"['\"]loss['\"]:\s*" + _VALUE)
_HF_TRAIN_LOSS: Final = re.compile(r"['\"]train_loss['\"]:\s*" + _VALUE)
_HF_GRAD: Final = re.compile(r"['\"]grad_norm['\"]:\s*" + _VALUE)


def _hf_dict(text: str) -> list[Reading]:
    found = []
    for match in _HF_DICT.finditer(text):
        line = match.group(0)
        found.append(
            Reading(
                line_start(text, match.start()),
                "hf",
                False,
                loss=_search(_HF_LOSS, line) or _search(_HF_TRAIN_LOSS, line),
                grad_norm=_search(_HF_GRAD, line),
            )
        )
    return found


# --- DeepSpeed ------------------------------------------------------------------------------

_DS_PIPE: Final = re.compile(
    r"\bsteps: (?P<step>\d+) loss: " + _VALUE + r" iter time \(s\): (?P<time>[0-9.]+)"
)
_DS_STEP: Final = re.compile(r"\bstep=(?P<step>\d+), skipped=\d+")


def _deepspeed(text: str) -> list[Reading]:
    found = [
        Reading(
            line_start(text, m.start()),
            "deepspeed",
            True,
            int(m.group("step")),
            _seconds_to_ms(m.group("time")),
            m.group(2),
        )
        for m in _DS_PIPE.finditer(text)
    ]
    found += [
        Reading(line_start(text, m.start()), "deepspeed", True, int(m.group("step")))
        for m in _DS_STEP.finditer(text)
    ]
    return found


# --- nanoGPT --------------------------------------------------------------------------------

_NANOGPT_ITER: Final = re.compile(
    r"\biter (?P<step>\d+): loss " + _VALUE + r", time (?P<time>[0-9.]+)ms"
)
_NANOGPT_EVAL: Final = re.compile(r"\bstep \d+: train loss \S+, val loss ")


def _nanogpt(text: str) -> list[Reading]:
    found = [
        Reading(
            line_start(text, m.start()),
            "nanogpt",
            True,
            int(m.group("step")),
            _float(m.group("time")),
            m.group(2),
        )
        for m in _NANOGPT_ITER.finditer(text)
    ]
    # The evaluation line is nanoGPT's, not a `step N loss` line of the plain format; its
    # values are an estimate over eval batches, not the training loss (the default failure
    # patterns still see a non-finite one).
    found += [
        Reading(line_start(text, m.start()), "nanogpt", False) for m in _NANOGPT_EVAL.finditer(text)
    ]
    return found


# --- fairseq --------------------------------------------------------------------------------

_FAIRSEQ_SIMPLE: Final = re.compile(r"\bepoch \d+:\s+\d+ / \d+ (?P<stats>[^\n]*)")
_FAIRSEQ_PIPES: Final = re.compile(r"\bepoch \d+ \|(?P<stats>[^\n]*)")
_FAIRSEQ_JSON: Final = re.compile(r"\{[^\n]*\"num_updates\"[^\n]*\}")
_KEY_EQUALS: Final = re.compile(r"(\w+)=([^,]+)")
_KEY_PIPE: Final = re.compile(r"\|?\s*(\w+) ([^|]+)")


def _fairseq_reading(pos: int, stats: dict[str, str]) -> Reading:
    ups = _float(stats.get("ups"))
    return Reading(
        pos,
        "fairseq",
        True,
        _int(stats.get("num_updates")),
        1000.0 / ups if ups else None,
        stats.get("loss"),
        stats.get("gnorm"),
    )


def _fairseq(text: str) -> list[Reading]:
    found = []
    for match in _FAIRSEQ_SIMPLE.finditer(text):
        stats = {k: v.strip() for k, v in _KEY_EQUALS.findall(match.group("stats"))}
        found.append(_fairseq_reading(line_start(text, match.start()), stats))
    for match in _FAIRSEQ_PIPES.finditer(text):
        start = line_start(text, match.start())
        if "valid on" in match.group("stats"):
            found.append(Reading(start, "fairseq", False))  # validation: not a training step
            continue
        stats = {k: v.strip() for k, v in _KEY_PIPE.findall(match.group("stats"))}
        found.append(_fairseq_reading(start, stats))
    for match in _FAIRSEQ_JSON.finditer(text):
        try:
            record = json.loads(match.group(0))
        except ValueError:
            continue
        if isinstance(record, dict):
            stats = {str(k): str(v) for k, v in record.items()}
            found.append(_fairseq_reading(line_start(text, match.start()), stats))
    return found


# --- torchtitan -----------------------------------------------------------------------------

_TITAN: Final = re.compile(
    r"\bstep:\s*(?P<step>\d+)\s+loss:\s*" + _VALUE + r"(?P<rest>[^\n]*?\b(?:memory|tps):[^\n]*)"
)
_TITAN_GRAD: Final = re.compile(r"\bgrad_norm:\s*" + _VALUE)


def _torchtitan(text: str) -> list[Reading]:
    return [
        Reading(
            line_start(text, m.start()),
            "torchtitan",
            True,
            int(m.group("step")),
            None,
            m.group(2),
            _search(_TITAN_GRAD, m.group("rest")),
        )
        for m in _TITAN.finditer(text)
    ]


# --- one JSON object per line ---------------------------------------------------------------

_JSON_LINE: Final = re.compile(r"^\s*\{.*\"step\".*\}\s*$", re.MULTILINE)


def _json_number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _json_value(record: dict[str, object], key: str) -> str | None:
    """A loss or grad norm as text; null is how a strict JSON writer spells a non-finite one."""
    if key not in record:
        return None
    value = record[key]
    return "nan" if value is None else str(value)


def _jsonl(text: str) -> list[Reading]:
    found = []
    for match in _JSON_LINE.finditer(text):
        try:
            record = json.loads(match.group(0))
        except ValueError:
            continue
        if not isinstance(record, dict):
            continue
        ms = _json_number(record.get("step_time_ms"))
        if ms is None:
            seconds = _json_number(record.get("step_time_s"))
            ms = seconds * 1000.0 if seconds is not None else None
        step = record.get("step")
        found.append(
            Reading(
                match.start(),
                "jsonl",
                isinstance(step, int) and not isinstance(step, bool),
                step if isinstance(step, int) and not isinstance(step, bool) else None,
                ms,
                _json_value(record, "loss"),
                _json_value(record, "grad_norm"),
            )
        )
    return found


# --- plain `step N loss: X` -----------------------------------------------------------------

_PLAIN: Final = re.compile(
    r"(?i)\b(?:step|iter(?:ation)?)\b[\s:=#]*(?P<step>\d+)(?:\s*/\s*\d+)?\b"
    r"(?P<rest>[^\n]*?\b[a-z_]*loss\b\s*[:=]?\s*" + _VALUE + r"[^\n]*)"
)
_PLAIN_LOSS: Final = re.compile(r"(?i)\b[a-z_]*loss\b\s*[:=]?\s*" + _VALUE)
_PLAIN_TIME: Final = re.compile(
    r"(?i)\b(?:step_time|time|dt|elapsed)\b\s*[:=]?\s*(?P<value>[0-9.]+(?:e[-+]?\d+)?)\s*"
    r"(?P<unit>ms|s)\b"
)
_PLAIN_GRAD: Final = re.compile(r"(?i)\bgrad(?:ient)?[ _]norm\b\s*[:=]?\s*" + _VALUE)


def _plain(text: str) -> list[Reading]:
    found = []
    for match in _PLAIN.finditer(text):
        rest = match.group("rest")
        timed = _PLAIN_TIME.search(rest)
        time_ms = None
        if timed is not None:
            value = _float(timed.group("value"))
            scale = 1.0 if timed.group("unit").lower() == "ms" else 1000.0
            time_ms = value * scale if value is not None else None
        found.append(
            Reading(
                line_start(text, match.start()),
                "plain",
                True,
                int(match.group("step")),
                time_ms,
                _search(_PLAIN_LOSS, rest),
                _search(_PLAIN_GRAD, rest),
            )
        )
    return found


# In priority order: a line read by one format is not read again by a later one (the plain
# format would otherwise also read nanoGPT's or Megatron's lines).
AUTO_FORMATS: Final = (
    Format("megatron", ("elapsed time per iteration",), _megatron),
    Format("nemo", ("train_step_timing",), _nemo),
    Format("deepspeed", ("iter time (s)", "skipped="), _deepspeed),
    Format("nanogpt", ("iter ", "val loss"), _nanogpt),
    Format("fairseq", ("epoch ", '"num_updates"'), _fairseq),
    Format("torchtitan", ("step:",), _torchtitan),
    Format("jsonl", ('"step"',), _jsonl),
    Format("tqdm", ("it/s", "s/it"), _tqdm),
    Format("hf", ("loss'", 'loss"', "grad_norm"), _hf_dict),
    Format("plain", ("step", "iter"), _plain),
)

# The named presets: a subset of the formats, timed only by what the log prints.
PRESET_FORMATS: Final = {
    "megatron": ("megatron",),
    "hf": ("tqdm", "hf"),
    "jsonl": ("jsonl",),
}


def formats_named(names: tuple[str, ...]) -> tuple[Format, ...]:
    """The formats of `names`, in priority order."""
    return tuple(f for f in AUTO_FORMATS if f.name in names)
