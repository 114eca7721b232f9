"""A click command that answers an unknown option naming a config key (``--epochs 3``) with the
override it meant (``-o epochs=3``)."""
from __future__ import annotations

import click

__all__ = ["OverrideHintCommand"]


class OverrideHintCommand(click.Command):
    def parse_args(self, ctx, args):
        typed = list(args)   # the parser consumes ``args``
        try:
            return super().parse_args(ctx, args)
        except click.NoSuchOption as exc:
            hint = _hint(exc.option_name, typed)
            if hint is None:
                raise
            raise click.UsageError("no such option: %s; did you mean `%s`? (config values are "
                                   "set with -o KEY=VALUE)" % (exc.option_name, hint),
                                   ctx=ctx) from None


def _hint(option, args) -> str | None:
    from ..config.option_hint import config_key_for_option

    name, _, value = option.partition("=")
    key = config_key_for_option(name)
    if key is None:
        return None
    if not value:
        # The value that followed it (``--epochs 3``), as typed.
        for i, arg in enumerate(args):
            if arg == option or arg.startswith(option + "="):
                value = arg.partition("=")[2] if "=" in arg else (
                    args[i + 1] if i + 1 < len(args) and not args[i + 1].startswith("-") else "")
                break
    return "-o %s=%s" % (key, value or "VALUE")
