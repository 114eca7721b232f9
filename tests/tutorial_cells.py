"""The python cells of the MXNet tutorials in ``shared/seeds/``, for the tests that run them."""
import re
from pathlib import Path

import pytest

SEEDS = Path(__file__).resolve().parents[1].parent / "shared" / "seeds"


def python_cells(name):
    """``(path, cells)`` of ``shared/seeds/<name>``; the test is skipped where the file is absent."""
    path = SEEDS / name
    if not path.is_file():
        pytest.skip("shared/seeds/%s is not present next to this checkout" % name)
    cells = re.findall(r"```\{\.python \.input\}\n(.*?)```", path.read_text(), re.S)
    assert cells, "no python cells in %s" % name
    return path, cells
