"""The python cells of the MXNet tutorials (copied from ``shared/seeds/`` into ``tests/data/seeds``)."""
import re
from pathlib import Path


SEEDS = Path(__file__).resolve().parent / "data" / "seeds"


def python_cells(name):
    """``(path, cells)`` of ``tests/data/seeds/<name>``."""
    path = SEEDS / name
    cells = re.findall(r"```\{\.python \.input\}\n(.*?)```", path.read_text(), re.S)
    assert cells, "no python cells in %s" % name
    return path, cells
