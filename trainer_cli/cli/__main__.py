"""``python -m trainer_cli.cli``: the ``trainer`` command without the console script."""
from . import main

if __name__ == "__main__":
    main(prog_name="trainer")
