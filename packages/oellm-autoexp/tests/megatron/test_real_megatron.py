"""Start-up checks against a real Megatron-LM checkout (skipped without one).

Point ``OELLM_AUTOEXP_MEGATRON_PATH`` at a Megatron-LM checkout whose
``megatron.training.arguments`` imports with this interpreter (torch installed; e.g. the
``core_r0.17.0`` branch on Python 3.11 — current main needs Python 3.12). The checks run in one
child process so that the real `megatron` package never meets the stand-in of the other tests.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ENV_VAR = "OELLM_AUTOEXP_MEGATRON_PATH"
CHECKOUT = os.environ.get(ENV_VAR)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not CHECKOUT or not (Path(CHECKOUT) / "megatron" / "training" / "arguments.py").is_file(),
        reason=f"no Megatron-LM checkout: set {ENV_VAR} to one (see docs/oellm-autoexp.md)",
    ),
]

# Each case: Megatron arguments added to BASE and the job's world size. The child prints, per
# case, the key and message of the ConfigError (or null when planning accepts it).
CHILD = r"""
import json, sys
from pathlib import Path
import compoconf
from oellm_autoexp.backends.base import BackendInterface, JobContext
import oellm_autoexp.backends.megatron  # registers MegatronBackend
from oellm_autoexp.errors import ConfigError

BASE = {"num_layers": 2, "hidden_size": 64, "num_attention_heads": 4, "seq_length": 128,
        "max_position_embeddings": 128, "micro_batch_size": 2, "global_batch_size": 16,
        "train_iters": 10, "lr": 1.0e-3, "mock_data": True, "tokenizer_type": "NullTokenizer",
        "vocab_size": 1000}
CASES = json.loads(sys.argv[2])
out = {}
for name, (extra, world) in CASES.items():
    cfg = compoconf.parse_config(BackendInterface.cfgtype, {
        "class_name": "MegatronBackend", "megatron_path": sys.argv[1],
        "env": {"CUDA_DEVICE_MAX_CONNECTIONS": "1"}, "megatron": {**BASE, **extra}})
    backend = cfg.instantiate(BackendInterface)
    job = JobContext(job_id="j", name="gpt_" + name, index=0, params={},
                     output_dir=Path("/tmp/gpt"), project="gpt", world_size=world)
    try:
        backend.validate([job])
        out[name] = None
    except ConfigError as exc:
        out[name] = [exc.key, exc.detail]
out["record"] = backend.validation_record()
print("RESULT=" + json.dumps(out))
"""

CASES = {
    "valid": [{}, 8],
    "fp16_bf16": [{"fp16": True, "bf16": True}, 8],
    "warmup": [{"lr_warmup_fraction": 0.1, "lr_warmup_iters": 5}, 8],
    "tp3": [{"tensor_model_parallel_size": 3}, 8],
    "batch": [{"global_batch_size": 10}, 8],
    # TP 2 makes validate_args ask the GPU's architecture: the rules finish the check
    "tp2_batch": [{"tensor_model_parallel_size": 2, "global_batch_size": 12}, 8],
}


@pytest.fixture(scope="module")
def results() -> dict[str, object]:
    assert CHECKOUT is not None
    done = subprocess.run(
        [sys.executable, "-c", CHILD, CHECKOUT, json.dumps(CASES)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("RESULT=")]
    assert done.returncode == 0 and lines, done.stderr[-2000:]
    result: dict[str, object] = json.loads(lines[0][len("RESULT=") :])
    return result


def test_valid_arguments_pass_megatrons_validate_args(results: dict[str, object]) -> None:
    assert results["valid"] is None
    record = results["record"]
    assert isinstance(record, dict) and record["validated_by"] == "megatron"
    assert record["validate_args"] is True and record["megatron_version"]


def test_megatron_rejections_name_job_and_key(results: dict[str, object]) -> None:
    assert results["fp16_bf16"] == [
        "backend.megatron.bf16",
        "Megatron's validate_args rejects job gpt_fp16_bf16 (world size 8): assert not args.bf16",
    ]
    key, detail = results["warmup"]  # type: ignore[misc]
    assert key == "backend.megatron.lr_warmup_iters"
    assert "can only specify one of lr-warmup-fraction and lr-warmup-iters" in detail
    key, detail = results["tp3"]  # type: ignore[misc]
    assert key == "slurm.sbatch" and "world size (8) is not divisible" in detail
    key, detail = results["batch"]  # type: ignore[misc]
    assert key == "backend.megatron.global_batch_size"
    assert "not divisible by micro batch size (2) times data parallel size (8)" in detail


def test_rules_finish_where_validate_args_needs_a_gpu(results: dict[str, object]) -> None:
    key, detail = results["tp2_batch"]  # type: ignore[misc]
    assert key == "backend.megatron.global_batch_size"
    assert "micro_batch_size 2 x data-parallel size 4 = 8" in detail
