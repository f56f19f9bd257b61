"""Validation of names that become directory names, and of docker image references.

The ticket, the workload name, cell names and environment names end up as path components of
the output tree (`<out>/<ticket>/<workload>/<ts>/cells/<cell>/`). They are restricted to a
boring alphabet so that no recipe can escape the output directory or smuggle in characters that
confuse a terminal or a shell. The runner passes image references and names to docker as argv
list items (never through a shell), so the image check is about catching typos early, not
about quoting.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Protocol

MAX_NAME_LENGTH = 100
INLINE_PREFIX = "_inline_"

# Letters, digits and `_.+-`; the first character may not be `.` (hidden files, `..`) or `-`
# (would read as an option to any tool that gets the path as an argument). `/`, `\`, spaces,
# control characters and everything else are outside the alphabet.
_SAFE_NAME = re.compile(r"[A-Za-z0-9_+][A-Za-z0-9_.+-]*")

# Docker reference grammar (distribution/reference), simplified to what we accept:
# [domain[:port]/]component(/component)*[:tag][@sha256:<64 hex>]
_DOMAIN_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
_DOMAIN = rf"{_DOMAIN_LABEL}(?:\.{_DOMAIN_LABEL})*(?::[0-9]+)?"
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_TAG = r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}"
_IMAGE_REF = re.compile(
    rf"(?:{_DOMAIN}/)?{_COMPONENT}(?:/{_COMPONENT})*(?::{_TAG})?(?:@sha256:[0-9a-f]{{64}})?"
)
MAX_IMAGE_REF_LENGTH = 255 + 1 + 128 + 72  # name + ':' + tag + '@sha256:' digest


def safe_name_problem(name: str) -> str | None:
    """Why `name` cannot be a directory name, or None if it can."""
    if not name:
        return "expected a non-empty name"
    if len(name) > MAX_NAME_LENGTH:
        return f"expected at most {MAX_NAME_LENGTH} characters, got {len(name)}"
    if not _SAFE_NAME.fullmatch(name):
        return (
            "expected letters, digits and '_.+-' only, not starting with '.' or '-' "
            "(it becomes a directory name)"
        )
    return None


def image_ref_problem(ref: str) -> str | None:
    """Why `ref` is not a docker image reference we accept, or None if it is."""
    if not ref:
        return "expected a non-empty docker image reference"
    if len(ref) > MAX_IMAGE_REF_LENGTH or not _IMAGE_REF.fullmatch(ref):
        return (
            "expected a docker image reference "
            "'[registry[:port]/]name[:tag][@sha256:digest]' with a lowercase repository path"
        )
    return None


def inline_environment_name(image_ref: str) -> str:
    """The auto-name of an inline docker environment: `_inline_` + 8 hex chars of blake2b.

    Same reference, same name: recipe mode (`{docker: ref}`) and flag mode (`image:ref`) agree,
    so results of both land in the same `environments/<name>/` directory layout.
    """
    return INLINE_PREFIX + hashlib.blake2b(image_ref.encode()).hexdigest()[:8]


# The output folder of runs without a ticket; no real ticket may take this name.
NO_TICKET = "_no_ticket_"


class _RunOwner(Protocol):
    # What `runs_parent` reads of a recipe; a protocol so this leaf never imports the recipe
    # package (which imports it).
    @property
    def ticket(self) -> str | None: ...

    @property
    def workload(self) -> str: ...


def runs_parent(output_root: Path, recipe: _RunOwner) -> Path:
    """`<output_root>/<ticket or _no_ticket_>/<workload>`: where `recipe`'s run dirs go."""
    ticket = recipe.ticket if recipe.ticket is not None else NO_TICKET
    for what, name in (("ticket", ticket), ("workload", recipe.workload)):
        problem = safe_name_problem(name)
        if problem:
            raise ValueError(f"{what} {name!r} cannot be a directory name: {problem}")
    return Path(output_root) / ticket / recipe.workload
