"""trainer_cli.ndarray keeps large freed arrays in glibc's heap (``trainer_cli._malloc``): a
step that allocates and frees the same arrays again takes no page faults for them."""
import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")

PROBE = textwrap.dedent("""
    import resource
    import numpy
    import trainer_cli.ndarray
    from trainer_cli import _malloc
    def step():
        # 8 MiB arrays, 80 MiB in all, freed together: more than glibc's trim threshold
        arrays = [numpy.ones(2 << 20, numpy.float32) for _ in range(10)]
        del arrays
    step()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(5):
        step()
    print(_malloc.tune(), resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
""")


def _probe(**env):
    full = dict(os.environ)
    for name in ("TRAINER_MALLOC_TUNE", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_"):
        full.pop(name, None)
    full.update(env)
    out = subprocess.run([sys.executable, "-c", PROBE], env=full, capture_output=True, text=True,
                         timeout=120, check=True).stdout.split()
    return out[0] == "True", int(out[1])


def test_freed_arrays_are_reused_without_page_faults():
    tuned, faults = _probe()
    assert tuned
    # 5 steps x 80 MiB would be ~100,000 faults if every array were mapped afresh.
    assert faults < 500


def test_turned_off_leaves_glibcs_defaults():
    tuned, faults = _probe(TRAINER_MALLOC_TUNE="0")
    assert not tuned
    assert faults > 20000
