"""``--epochs 3`` on a command that takes ``-o KEY=VALUE``: which config key such an option
meant, so that the error can say ``did you mean -o epochs=3?``."""
from __future__ import annotations

__all__ = ["config_key_for_option"]


def config_key_for_option(option: str) -> str | None:
    """The config key an unknown command-line option names (``--epochs`` -> ``epochs``,
    ``--batch-size`` -> ``data.batch_size``, ``--data.batch_size`` -> itself): a key path of the
    schema, or the only one whose last part it is; None when it names none (or several)."""
    from .report import schema_paths
    from .schema import RunConfig

    name = option.lstrip("-").replace("-", "_")
    if not name:
        return None
    keys = [".".join(map(str, path)) for path in schema_paths(RunConfig)]
    if name in keys:
        return name
    leaves = sorted({key for key in keys if key.rsplit(".", 1)[-1] == name})
    return leaves[0] if len(leaves) == 1 else None
