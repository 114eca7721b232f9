"""What a checkpoint's ``kvstore.npz`` holds and how each rank gets its own residuals back
(:mod:`trainer_cli.run.kvstate`), without MPI: a stand-in plays one rank of a dist store. The
real store's gather and restore run under mpiexec in test_dist.py, and a whole compressed dist
run is resumed in test_run_subprocess.py."""
import numpy as np
import pytest

import trainer_cli
from trainer_cli import kvstore, nd
from trainer_cli.kvstore import gather
from trainer_cli.kvstore.compression import GradientCompression
from trainer_cli.kvstore.dist import _DistStore
from trainer_cli.run import kvstate


class OneRank(_DistStore):
    """A dist store as rank ``rank`` of ``num_workers`` sees it, with its two collectives (the
    gather and the restore of the residuals) played without MPI."""

    def __init__(self, rank, num_workers, every=None):      # no MPI job to join
        self._rank, self._num_workers = rank, num_workers
        self._gc = GradientCompression({"type": "2bit", "threshold": 0.5})
        self.every = every        # what the gather returns on rank 0
        self.gathers = 0
        self.restored = None

    rank = property(lambda self: self._rank)
    num_workers = property(lambda self: self._num_workers)

    def gather_wire_residuals(self, root=0):
        self.gathers += 1
        return self.every if self.rank == root else None

    def set_wire_residuals(self, residuals):
        self.restored = residuals


def _arr(*values):
    return np.array(values, dtype=np.float32)


def test_rank_0_names_every_ranks_residuals_by_key_and_rank():
    every = [{0: _arr(1, 2), 2: _arr(3)}, {0: _arr(4, 5), 2: _arr(6)}]
    kv = OneRank(0, 2, every)
    got = kvstate.get_residuals(kv)
    assert sorted(got) == ["r0_w0", "r0_w1", "r2_w0", "r2_w1"]
    np.testing.assert_array_equal(got["r0_w1"], [4, 5])
    np.testing.assert_array_equal(got["r2_w0"], [3])


def test_other_ranks_take_part_in_the_gather_and_write_nothing():
    kv = OneRank(1, 2)
    assert kvstate.get_residuals(kv) == {}
    assert kv.gathers == 1


def test_without_compression_nothing_is_gathered():
    kv = OneRank(0, 2, [{}, {}])
    kv._gc = None
    assert kvstate.get_residuals(kv) == {} and kv.gathers == 0


def test_each_rank_takes_its_own_residuals_back():
    saved = {"r0_w0": _arr(1), "r0_w1": _arr(2), "r3_w0": _arr(3), "r3_w1": _arr(4),
             "r0_0": _arr(9)}   # an in-process entry means nothing to a dist store
    for rank in (0, 1):
        kv = OneRank(rank, 2)
        assert kvstate.set_residuals(kv, saved, [trainer_cli.cpu(0)], "ck/kvstore.npz") is None
        assert sorted(kv.restored) == [0, 3]
        assert kv.restored[0][0] == 1 + rank and kv.restored[3][0] == 3 + rank


@pytest.mark.parametrize("saved_ranks, workers, saved_text", [
    (2, 3, "2 ranks"), (2, 1, "2 ranks"), (3, 2, "3 ranks"), (1, 2, "1 rank")])
def test_another_number_of_ranks_restarts_the_residuals_with_a_note(saved_ranks, workers,
                                                                     saved_text):
    saved = {"r%d_w%d" % (k, r): _arr(r) for k in range(2) for r in range(saved_ranks)}
    kv = OneRank(0, workers)
    note = kvstate.set_residuals(kv, saved, [trainer_cli.cpu(0)], "ck/kvstore.npz")
    assert note.startswith("ck/kvstore.npz holds the gradient-compression residuals of %s, but "
                           "this job has %d: " % (saved_text, workers))
    assert "start again from zero on every rank" in note
    assert note.endswith("not bitwise as it would have with %s." % saved_text)
    assert kv.restored is None


def test_a_dist_checkpoint_saved_before_residuals_were_kept_says_so():
    kv = OneRank(1, 2)
    note = kvstate.set_residuals(kv, {}, [trainer_cli.cpu(0)], "ck")
    assert note.startswith("ck holds no gradient-compression residuals of the workers")
    assert "not bitwise" in note and kv.restored is None


def test_in_process_store_reads_only_its_own_entries():
    ctxs = [trainer_cli.cpu(0), trainer_cli.cpu(1)]
    kv = kvstore.create("device")
    kv.set_gradient_compression({"type": "2bit", "threshold": 0.5})
    kv.init(0, nd.zeros((2,)))
    saved = {"r0_0": _arr(0.1, 0.2), "r0_1": _arr(0.3, 0.4), "r0_w1": _arr(7, 7)}
    assert kvstate.set_residuals(kv, saved, ctxs, "ck/kvstore.npz") is None
    got = kv.compression_residuals()
    assert sorted(got) == [(0, 0), (0, 1)]
    np.testing.assert_array_equal(got[(0, 1)], _arr(0.3, 0.4))
    assert sorted(kvstate.get_residuals(kv)) == ["r0_0", "r0_1"]


def test_gather_packing_round_trips_names_dtypes_and_shapes():
    arrays = {0: _arr(1, 2, 3), "w": np.arange(6, dtype=np.float64).reshape(2, 3),
              7: np.zeros((0, 4), dtype=np.int32), 8: np.array([np.nan], dtype=np.float32)}
    buf = gather.pack(arrays)
    assert buf.dtype == np.uint8 and buf.ndim == 1
    got = gather.unpack(buf)
    assert list(got) == [0, "w", 7, 8]
    for name, arr in arrays.items():
        assert got[name].dtype == arr.dtype and got[name].shape == arr.shape
        assert got[name].tobytes() == arr.tobytes()
        assert got[name].flags.aligned and got[name].flags.writeable
    for damaged in (buf[:-1], np.concatenate([buf, buf[:1]])):
        with pytest.raises(ValueError, match="does not match its header"):
            gather.unpack(damaged)
    with pytest.raises(TypeError, match="dtype object"):
        gather.pack({"x": np.array([None])})
