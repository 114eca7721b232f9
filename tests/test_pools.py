"""close_pool: a pool ends in bounded time, also when a worker died holding a queue's lock, and
interpreter exit does not wait for a pool whose terminate() stays blocked."""
import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.skipif("fork" not in __import__("multiprocessing").get_all_start_methods(),
                                reason="the pools under test are forked")

# Each case runs in a fresh interpreter with a timeout: a hang fails the test instead of the
# suite, and the exit code shows that interpreter exit did not block either.
_PRELUDE = textwrap.dedent("""
    import multiprocessing, os, signal, sys
    from trainer_cli._pools import close_pool

    def die_holding_task_lock():
        # pool.worker(inqueue, ...) is a caller of this task: take its queue's read lock as
        # an idle worker holds it, then die as the out-of-memory killer makes it die.
        frame = sys._getframe(1)
        while "inqueue" not in frame.f_locals:
            frame = frame.f_back
        frame.f_locals["inqueue"]._rlock.acquire()
        os.kill(os.getpid(), signal.SIGKILL)

    def wait_ended(process):
        # the pool's thread may reap it first; its exit code shows it is gone
        import time
        deadline = time.monotonic() + 10
        while process.exitcode is None and time.monotonic() < deadline:
            process.join(0.05)
            time.sleep(0.001)
""")


def _run(body, timeout=20):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [os.path.dirname(os.path.dirname(os.path.abspath(__file__)))]
        + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    done = subprocess.run([sys.executable, "-c", _PRELUDE + textwrap.dedent(body)], env=env,
                          capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_pool_whose_worker_died_holding_the_task_lock_closes():
    out = _run("""
        pool = multiprocessing.get_context("fork").Pool(1)
        worker = pool._pool[0]
        pool.apply_async(die_holding_task_lock)
        wait_ended(worker)
        assert worker.exitcode == -signal.SIGKILL, worker.exitcode
        # what hangs Pool.terminate(): the lock stays taken by a dead process
        assert not pool._inqueue._rlock.acquire(False)
        ended = close_pool(pool, timeout=10)
        assert ended is True
        assert all(p.exitcode is not None for p in pool._pool)
        print("closed")
    """)
    assert out.split() == ["closed"]


def test_pool_closes_while_its_dead_worker_is_not_yet_replaced():
    # The pool's own thread removes a dead worker from its list before it starts the one in its
    # place: a close in that window sees no worker at all, and the task lock is still held by
    # the dead one. (The window is held open here by a pool that starts no replacement.)
    out = _run("""
        import time
        import multiprocessing.pool
        pool = multiprocessing.get_context("fork").Pool(1)
        multiprocessing.pool.Pool._repopulate_pool_static = staticmethod(lambda *a: None)
        worker = pool._pool[0]
        pool.apply_async(die_holding_task_lock)
        wait_ended(worker)
        deadline = time.monotonic() + 10
        while pool._pool and time.monotonic() < deadline:
            time.sleep(0.01)
        assert pool._pool == [] and not pool._inqueue._rlock.acquire(False)
        assert close_pool(pool, timeout=10) is True
        print("closed")
    """)
    assert out.split() == ["closed"]


def test_busy_and_idle_workers_are_killed_and_the_pool_closes():
    out = _run("""
        import time
        pool = multiprocessing.get_context("fork").Pool(3)
        workers = list(pool._pool)
        assert pool.apply(os.getpid) in [w.pid for w in workers]
        pool.apply_async(time.sleep, (60,))          # one busy far beyond the bound
        assert close_pool(pool, timeout=10) is True
        assert [w.exitcode for w in workers] == [-signal.SIGKILL] * 3
        print("closed")
    """)
    assert out.split() == ["closed"]


def test_thread_pool_closes():
    out = _run("""
        import multiprocessing.pool
        pool = multiprocessing.pool.ThreadPool(2)
        assert pool.apply(sum, ([1, 2],)) == 3
        assert close_pool(pool, timeout=10) is True
        assert not any(t.is_alive() for t in pool._pool)
        print("closed")
    """)
    assert out.split() == ["closed"]


def test_terminate_that_never_returns_is_left_and_exit_does_not_wait_for_it():
    # Whatever else blocks terminate() (here: its first step, made to wait forever), close_pool
    # returns after its timeout with the workers killed, and interpreter exit does not block
    # on that pool (its exit finalizer is the call left blocked; it does not run again).
    out = _run("""
        import threading
        import multiprocessing.pool
        never = threading.Event()
        multiprocessing.pool.Pool._help_stuff_finish = staticmethod(lambda *a: never.wait())
        pool = multiprocessing.get_context("fork").Pool(2)
        workers = list(pool._pool)
        assert pool.apply(os.getpid) in [w.pid for w in workers]
        assert close_pool(pool, timeout=0.5) is False
        for w in workers:
            wait_ended(w)
        assert [w.exitcode for w in workers] == [-signal.SIGKILL] * 2
        print("left")
    """)
    assert out.split() == ["left"]


@pytest.mark.parametrize("cut", ["length_promising_more", "body_that_is_no_pickle"])
def test_task_stream_cut_mid_message_does_not_stop_the_close(cut):
    # A worker killed while reading a task leaves the rest of that message in the pipe: read as
    # messages, the stream then waits for bytes that never come or fails to unpickle.
    out = _run(f"""
        import struct
        import multiprocessing.pool
        pool = multiprocessing.get_context("fork").Pool(1)
        multiprocessing.pool.Pool._repopulate_pool_static = staticmethod(lambda *a: None)
        worker = pool._pool[0]
        pool.apply_async(die_holding_task_lock)
        wait_ended(worker)
        tail = (struct.pack("!i", 1000) + b"cut" if "{cut}" == "length_promising_more"
                else struct.pack("!i", 3) + b"cut")
        os.write(pool._inqueue._writer.fileno(), tail)
        assert close_pool(pool, timeout=10) is True
        assert not any(t.is_alive() for t in
                       (pool._worker_handler, pool._task_handler, pool._result_handler))
        print("closed")
    """)
    assert out.split() == ["closed"]


def test_terminate_that_fails_half_way_leaves_no_worker_starting_behind():
    # terminate() stopped by an error after its first step: close_pool says so, and the pool's
    # thread has ended, so no worker it starts outlives the pool (interpreter exit would wait
    # for one).
    out = _run("""
        import multiprocessing.pool
        def fail(*args):
            raise EOFError("Ran out of input")
        multiprocessing.pool.Pool._help_stuff_finish = staticmethod(fail)
        pool = multiprocessing.get_context("fork").Pool(2)
        assert pool.apply(os.getpid) in [w.pid for w in pool._pool]
        assert close_pool(pool, timeout=10) is False
        assert not pool._worker_handler.is_alive()
        assert all(p.exitcode is not None for p in pool._pool)
        print("left")
    """)
    assert out.split() == ["left"]
