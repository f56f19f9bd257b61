"""`oellm-autoexp migrate UPSTREAM.yaml`: an upstream oellm-autoexp experiment as our config.

The config goes to stdout (``> ours.yaml``); each thing that could not be translated is one
line on stderr, ``oellm-autoexp: migrate: <upstream key>: <why>``, followed by a count line.
Exit 0 when a config was written (notes or not), 2 for bad input (one line naming file and key).
"""

from __future__ import annotations

from pathlib import Path

import click

from oellm_autoexp.errors import EXIT_OK


@click.command("migrate")
@click.argument("upstream", type=click.Path(path_type=Path))
@click.option(
    "--config-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Upstream's config tree (the directory with autoexp.yaml); default: found above UPSTREAM.",
)
def migrate_command(upstream: Path, config_dir: Path | None) -> int:
    """Translate an upstream OpenEuroLLM/oellm-autoexp experiment config into ours (stdout)."""
    from oellm_autoexp.config.yaml_text import dump_text
    from oellm_autoexp.migrate import migrate_file

    migration = migrate_file(upstream, config_dir=config_dir)
    header = (
        f"# migrated from {upstream} by oellm-autoexp migrate: {migration.jobs} job(s) of "
        f"upstream's {migration.upstream_points} point(s)\n"
    )
    click.echo(header + dump_text(migration.config), nl=False)
    for note in migration.notes:
        click.echo(f"oellm-autoexp: migrate: {note}", err=True)
    click.echo(
        f"oellm-autoexp: migrate: {migration.jobs} job(s) translated; {migration.filtered} "
        f"dropped by upstream's filters; {migration.dependent} left out (sibling stages); "
        f"{len(migration.notes)} note(s)",
        err=True,
    )
    return EXIT_OK
