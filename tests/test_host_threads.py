"""``ndarray.host_threads``: pieces on several threads, results combined in order, errors stop
every thread, and the BLAS runs one thread per call meanwhile and gets its count back."""
import threading
import time

import numpy as np
import pytest

from trainer_cli.ndarray import host_threads


@pytest.fixture
def three_threads(monkeypatch):
    monkeypatch.setattr(host_threads, "blas_threads", lambda: 3)


def test_pieces_run_on_several_threads_and_combine_in_order(three_threads):
    seen, order = set(), []

    def piece(i):
        seen.add(threading.get_ident())
        time.sleep(0.002 * ((7 * i) % 5))      # finish out of order
        return i * i

    host_threads.run(20, piece, lambda i, value: order.append((i, value)))
    assert order == [(i, i * i) for i in range(20)]
    assert len(seen) > 1


def test_one_thread_runs_in_the_caller(monkeypatch):
    monkeypatch.setattr(host_threads, "blas_threads", lambda: 1)
    seen = []
    host_threads.run(4, lambda i: seen.append(threading.get_ident()))
    assert set(seen) == {threading.get_ident()}


def test_a_failing_piece_stops_every_thread_and_is_raised(three_threads):
    ran, combined = [], []

    def piece(i):
        ran.append(i)
        if i == 3:
            raise ValueError("piece 3 failed")
        time.sleep(0.001)
        return i

    with pytest.raises(ValueError, match="piece 3 failed"):
        host_threads.run(200, piece, lambda i, value: combined.append(i))
    assert combined == list(range(len(combined))) and 3 not in combined
    assert len(ran) < 200           # the others stopped instead of finishing everything
    # The pool is usable again: no thread is left waiting for piece 3's turn.
    out = []
    host_threads.run(5, lambda i: i, lambda i, v: out.append(v))
    assert out == [0, 1, 2, 3, 4]


def test_a_failing_combine_is_raised(three_threads):
    def combine(i, value):
        if i == 2:
            raise RuntimeError("combine 2 failed")

    with pytest.raises(RuntimeError, match="combine 2 failed"):
        host_threads.run(10, lambda i: i, combine)


def test_the_blas_runs_one_thread_during_the_pieces_and_gets_its_count_back():
    threadpoolctl = pytest.importorskip("threadpoolctl")
    if not host_threads._blas():
        pytest.skip("no BLAS library that threadpoolctl can control")
    with threadpoolctl.threadpool_limits(2, user_api="blas"):
        if host_threads.blas_threads() < 2:
            pytest.skip("the BLAS cannot run two threads here")
        during = []
        host_threads.run(6, lambda i: during.append(host_threads.blas_threads()))
        assert during == [1] * 6
        assert host_threads.blas_threads() == 2


def test_a_concurrent_caller_runs_its_pieces_alone(three_threads):
    """Two threads calling at once: one gets the pool, the other runs sequentially; both finish
    with their results in order."""
    results = {}
    start = threading.Barrier(2)

    def caller(name):
        start.wait()
        got = []
        host_threads.run(30, lambda i: (time.sleep(0.0005), i)[1], lambda i, v: got.append(v))
        results[name] = got

    threads = [threading.Thread(target=caller, args=(k,)) for k in "ab"]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert results == {"a": list(range(30)), "b": list(range(30))}


def test_without_combine_a_slow_piece_holds_no_other_thread_back(three_threads):
    """Piece 0 waits until every other piece is done: the other threads take them all meanwhile
    (none waits for piece 0's turn after its first piece). The wait ends in any case."""
    others_done = threading.Event()
    done, seen_by_piece_0 = [], []

    def piece(i):
        if i == 0:
            seen_by_piece_0.append(others_done.wait(timeout=10))
            return
        done.append(i)
        if len(done) == 29:
            others_done.set()

    host_threads.run(30, piece)
    assert seen_by_piece_0 == [True] and sorted(done) == list(range(1, 30))


def test_run_summed_adds_in_index_order_on_any_thread_count(monkeypatch):
    """The results other than None, added in index order (float32 sums that depend on it): the
    same bits on 1, 2, 3 and 8 threads, the bits of a sequential sum."""
    rng = np.random.default_rng(0)
    parts = [rng.standard_normal((7, 5)).astype(np.float32) * 10.0 ** rng.integers(-3, 3)
             for _ in range(25)]

    def piece(i):
        time.sleep(0.001 * ((7 * i) % 3))      # finish out of order
        return None if i % 4 == 1 else parts[i] * np.float32(1.5)

    expect = parts[0] * np.float32(1.5)
    for i in range(2, len(parts)):
        if i % 4 != 1:
            expect += parts[i] * np.float32(1.5)
    for threads in (1, 2, 3, 8):
        monkeypatch.setattr(host_threads, "blas_threads", lambda threads=threads: threads)
        got = host_threads.run_summed(len(parts), piece)
        np.testing.assert_array_equal(got.view(np.uint32), expect.view(np.uint32))
    assert host_threads.run_summed(4, lambda i: None) is None


def test_pieces_see_the_callers_numpy_errstate(three_threads):
    modes = []

    def piece(i):
        time.sleep(0.001)
        modes.append(np.geterr()["invalid"])

    with np.errstate(invalid="raise"):
        host_threads.run(12, piece)
    assert modes == ["raise"] * 12


# What NumPy's OpenBLAS itself holds after ``import trainer_cli``: the exponent of its idle
# threads' spin (0: its default, 2**28 cycles) and whether its pool was stopped to take it.
_OPENBLAS_PROBE = """
import ctypes, json, os, sys
{first}
import trainer_cli
from trainer_cli import _openblas_idle
import numpy
from threadpoolctl import threadpool_info
path = [i["filepath"] for i in threadpool_info() if i["internal_api"] == "openblas"][0]
lib = ctypes.CDLL(path)
lib.openblas_thread_timeout.restype = ctypes.c_uint
numpy.ones((300, 300), numpy.float32) @ numpy.ones((300, 300), numpy.float32)
print(json.dumps([os.environ.get("OPENBLAS_THREAD_TIMEOUT"), lib.openblas_thread_timeout()]))
"""


@pytest.mark.parametrize("user_value, numpy_first, expect", [
    (None, False, ["20", 20]), ("28", False, ["28", 28]), (None, True, ["20", 20]),
    ("28", True, ["28", 28])])
def test_openblas_spins_briefly_unless_the_user_says_even_with_numpy_loaded_first(
        user_value, numpy_first, expect):
    # NumPy's wheels carry OpenBLAS; its idle threads spin 2**20 cycles after import trainer_cli,
    # whether NumPy was loaded before it (the pool restarted with the new value) or after.
    import json
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_THREAD_TIMEOUT"}
    if user_value is not None:
        env["OPENBLAS_THREAD_TIMEOUT"] = user_value
    code = _OPENBLAS_PROBE.format(first="import numpy; numpy.ones((300, 300)) @ numpy.ones("
                                  "(300, 300))" if numpy_first else "")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True, timeout=120)
    assert json.loads(out.stdout) == expect


def test_pieces_keep_within_the_budget_with_one_item_at_least():
    assert host_threads.pieces(10, 3, 9) == host_threads.even_pieces(10, 4)   # 3 items each
    assert host_threads.pieces(10, 3, 1000) == [(0, 10)]
    assert host_threads.pieces(4, 50, 10) == [(0, 1), (1, 2), (2, 3), (3, 4)]  # over budget
    assert host_threads.pieces(3, 50, 10) == [(0, 1), (1, 2), (2, 3)]   # odd, one item each
    assert host_threads.pieces(0, 3, 9) == [(0, 0)]
    assert host_threads.pieces(6, 1, 3) == host_threads.even_pieces(6, 2)


@pytest.mark.parametrize("n, per", [(32, 7), (32, 11), (32, 3), (9, 2), (64, 5), (19, 6)])
def test_pieces_of_several_items_come_in_an_even_count(n, per):
    """Five pieces of seven items become four of eight: an odd count above one, of pieces of
    several items, loses one piece (two threads then share them evenly), and no piece grows
    past half as large again as the budget."""
    found = host_threads.pieces(n, 10, 10 * per)
    count = -(-n // per)
    assert len(found) == (count - 1 if count > 2 and count % 2 else count)
    assert found == host_threads.even_pieces(n, len(found))
    assert max(z - a for a, z in found) <= 1.5 * per


def test_many_quick_runs_combine_every_piece_and_keep_their_workers(three_threads):
    """Runs back to back whose pieces finish before a worker wakes, or while it runs one: every
    run combines all its pieces, in order, before it returns (a worker's last one included), and
    the same workers serve them all (no thread is started per run)."""
    def workers():
        return [t for t in threading.enumerate() if t.name == "trainer-piece"]

    host_threads.run(3, lambda i: i)
    before = workers()
    assert len(before) >= 2
    for k in range(500):
        count = 2 + k % 5
        got = []
        host_threads.run(count, lambda i: (time.sleep(0.0002) if i == count - 1 else None, i)[1],
                         lambda i, v: got.append(v))
        assert got == list(range(count))
        assert host_threads.run_summed(count, lambda i: np.ones(3) * i)[0] == sum(range(count))
    assert workers() == before
