"""The nine Gluon losses added after the first five (KLDiv, CTC, Hinge, SquaredHinge, Logistic,
Triplet, PoissonNLL, CosineEmbedding, SDML) and ``nd.CTCLoss``: values and input gradients
against MXNet 1.9.1's (tests/data/mxnet_losses/, made by its make_reference.py with the real
MXNet), gradients against finite differences, and their use from a config."""
import os

import numpy as np
import pytest

from trainer_cli import autograd, nd
from trainer_cli.gluon import loss as L
from gradcheck import check_grad

REF = np.load(os.path.join(os.path.dirname(__file__), "data", "mxnet_losses", "reference.npz"),
              allow_pickle=False)

# name -> (loss, indices of the differentiated inputs); the same as make_reference.py.
CASES = {
    "kl_logits": (lambda: L.KLDivLoss(), [0]),
    "kl_softmax": (lambda: L.KLDivLoss(from_logits=False), [0]),
    "kl_axis0_w": (lambda: L.KLDivLoss(from_logits=False, axis=0, weight=0.5), [0]),
    "kl_sample_weight": (lambda: L.KLDivLoss(), [0]),
    "kl_batch1_3d": (lambda: L.KLDivLoss(batch_axis=1), [0, 1]),
    "hinge": (lambda: L.HingeLoss(), [0]),
    "hinge_margin_w": (lambda: L.HingeLoss(margin=0.5, weight=2.0), [0]),
    "sq_hinge": (lambda: L.SquaredHingeLoss(), [0]),
    "sq_hinge_margin": (lambda: L.SquaredHingeLoss(margin=2, batch_axis=1), [0, 1]),
    "logistic_signed": (lambda: L.LogisticLoss(), [0]),
    "logistic_binary": (lambda: L.LogisticLoss(label_format="binary", weight=0.3), [0, 1]),
    "triplet": (lambda: L.TripletLoss(), [0, 1, 2]),
    "triplet_margin_w": (lambda: L.TripletLoss(margin=3.0, weight=0.7), [0, 1, 2]),
    "poisson_logits": (lambda: L.PoissonNLLLoss(), [0]),
    "poisson_prob_full": (lambda: L.PoissonNLLLoss(from_logits=False, compute_full=True), []),
    "poisson_w_sw": (lambda: L.PoissonNLLLoss(weight=2.0), [0]),
    "cosine": (lambda: L.CosineEmbeddingLoss(), [0, 1]),
    "cosine_margin_sw": (lambda: L.CosineEmbeddingLoss(margin=0.2, weight=1.5), [0, 1]),
    "sdml": (lambda: L.SDMLLoss(), [0, 1]),
    "sdml_smooth": (lambda: L.SDMLLoss(smoothing_parameter=0.1), [0, 1]),
    "ctc_ntc": (lambda: L.CTCLoss(), [0]),
    "ctc_tnc_tn": (lambda: L.CTCLoss(layout="TNC", label_layout="TN"), [0]),
    "ctc_lengths": (lambda: L.CTCLoss(), [0]),
    "ctc_weight": (lambda: L.CTCLoss(weight=0.5), [0]),
    "ctc_impossible": (lambda: L.CTCLoss(), [0]),
}
def _inputs(name, prefix):
    out, i = [], 0
    while "%s/%s%d" % (name, prefix, i) in REF.files:
        out.append(REF["%s/%s%d" % (name, prefix, i)])
        i += 1
    return out


def _run(name, make, diff):
    arrays = [nd.array(a, dtype=a.dtype) for a in _inputs(name, "in")]
    # Further positional arguments: extra<k> where stored, None (an absent optional) between.
    extra = [nd.array(REF[k]) if k in REF.files else None
             for k in ("%s/extra%d" % (name, j) for j in range(4))]
    while extra and extra[-1] is None:
        extra.pop()
    for i in diff:
        arrays[i].attach_grad()
    loss = make()
    if not diff:
        return loss(*arrays, *extra), arrays
    with autograd.record():
        out = loss(*arrays, *extra)
    out.backward(nd.array(REF[name + "/head"]))
    return out, arrays


@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_mxnet(name):
    make, diff = CASES[name]
    out, arrays = _run(name, make, diff)
    want = REF[name + "/out"]
    assert out.shape == want.shape and out.dtype == want.dtype
    # SDML's KL sums terms of size ~10 that cancel to ~0.04: float32 rounding of the terms
    # (MXNet's log-softmax against NumPy's) leaves a few 1e-6 absolute.
    atol = 1e-5 if name.startswith("sdml") else 1e-6
    np.testing.assert_allclose(out.asnumpy(), want, rtol=2e-5, atol=atol)
    for i in diff:
        got, ref = arrays[i].grad.asnumpy(), REF["%s/grad%d" % (name, i)]
        if name == "ctc_impossible":
            # MXNet leaves the impossible sample's gradient uninitialised; here it is 0.
            assert not got[0].any()
            got, ref = got[1:], ref[1:]
        np.testing.assert_allclose(got, ref, rtol=2e-5, atol=5 * atol, err_msg="grad %d" % i)


@pytest.mark.parametrize("name", ["ctcop_first", "ctcop_first_lengths", "ctcop_last_dlen"])
def test_ctc_operator_matches_mxnet(name):
    data, label, *lengths = _inputs(name, "in")
    kw = {"ctcop_first": dict(blank_label="first"),
          "ctcop_first_lengths": dict(blank_label="first", use_data_lengths=True,
                                      use_label_lengths=True),
          "ctcop_last_dlen": dict(blank_label="last", use_data_lengths=True)}[name]
    x = nd.array(data)
    x.attach_grad()
    with autograd.record():
        out = nd.CTCLoss(x, nd.array(label), *[nd.array(a) for a in lengths], **kw)
    out.backward(nd.array(REF[name + "/head"]))
    np.testing.assert_allclose(out.asnumpy(), REF[name + "/out"], rtol=2e-5)
    np.testing.assert_allclose(x.grad.asnumpy(), REF[name + "/grad0"], rtol=2e-5, atol=2e-6)


def test_poisson_full_zero_target_is_finite_where_mxnet_gives_nan():
    pred, target = _inputs("poisson_full_zero_target", "in")
    assert np.isnan(REF["poisson_full_zero_target/out"]).all()
    got = L.PoissonNLLLoss(compute_full=True)(nd.array(pred), nd.array(target)).asnumpy()
    t = target.astype(np.float64)
    stirling = np.where(t > 1, t * np.log(np.maximum(t, 1)) - t + 0.5 * np.log(2 * np.pi * np.maximum(t, 1)), 0)
    want = (np.exp(pred.astype(np.float64)) - t * pred + stirling).mean()
    np.testing.assert_allclose(got, [want], rtol=1e-6)


rng = np.random.RandomState(3)


def _signs(*shape):
    return np.where(rng.uniform(size=shape) < 0.5, -1.0, 1.0)


def _away_from_kinks(x, label, margin):
    """Moves ``pred`` off the points where a hinge's slope jumps (finite differences there
    straddle both sides)."""
    z = margin - x * label
    return np.where(np.abs(z) < 1e-2, x + 0.1, x)


@pytest.mark.parametrize("make,gen", [
    (lambda: L.KLDivLoss(from_logits=False, weight=0.7),
     lambda: (rng.randn(3, 4), rng.uniform(0.1, 1, (3, 4)))),
    (lambda: L.HingeLoss(margin=0.5),
     lambda: (lambda lab: (_away_from_kinks(rng.randn(3, 4), lab, 0.5), lab))(_signs(3, 4))),
    (lambda: L.SquaredHingeLoss(),
     lambda: (lambda lab: (_away_from_kinks(rng.randn(3, 4), lab, 1), lab))(_signs(3, 4))),
    (lambda: L.LogisticLoss(label_format="binary"),
     lambda: (rng.randn(3, 4), rng.uniform(0, 1, (3, 4)))),
    (lambda: L.PoissonNLLLoss(from_logits=False, compute_full=True),
     # targets off 1, where the Stirling term switches on
     lambda: (rng.uniform(0.5, 3, (3, 4)), rng.choice([0.0, 0.5, 1.5, 2.0, 3.7], (3, 4)))),
    (lambda: L.SDMLLoss(), lambda: (rng.randn(4, 3), rng.randn(4, 3))),
])
def test_two_input_losses_gradients(make, gen):
    loss = make()
    check_grad(lambda a, b: loss(a, b), *gen(), rtol=1e-5, atol=1e-6)


def test_triplet_and_cosine_gradients():
    trip = L.TripletLoss(margin=0.5)
    check_grad(lambda a, b, c: trip(a, b, c), rng.randn(4, 3), rng.randn(4, 3), rng.randn(4, 3),
               rtol=1e-5, atol=1e-6)
    cos = L.CosineEmbeddingLoss(margin=-0.5)
    label = np.array([1.0, -1.0, 1.0, -1.0])
    check_grad(lambda a, b, lab: cos(a, b, lab), rng.randn(4, 3), rng.randn(4, 3), label,
               wrt=[0, 1], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("blank,lengths", [("last", False), ("first", True)])
def test_ctc_gradient_finite_differences(blank, lengths):
    T, N, C = 5, 3, 4
    if blank == "last":
        label = np.array([[0, 1, -1], [2, 2, -1], [1, 0, 2]], float)
    else:
        label = np.array([[1, 2, 0], [3, 3, 0], [1, 1, 2]], float)
    extra, kw = [], dict(blank_label=blank)
    if lengths:
        extra = [np.array([5.0, 4.0, 5.0]), np.array([2.0, 2.0, 3.0])]
        kw.update(use_data_lengths=True, use_label_lengths=True)
    data = rng.randn(T, N, C)
    check_grad(lambda x, lab, *e: nd.CTCLoss(x, lab, *e, **kw), data, label, *extra, wrt=[0],
               rtol=1e-5, atol=1e-6)


def test_ctc_brute_force_probability():
    """The loss is -log of the summed probability of every frame path that collapses to the
    label (enumerated here), for a blank-first and a blank-last alphabet."""
    import itertools
    T, C = 4, 3
    scores = rng.randn(T, 1, C)
    p = np.exp(scores[:, 0]) / np.exp(scores[:, 0]).sum(axis=1, keepdims=True)
    for blank, label in (("first", [1, 1]), ("last", [0, 1])):
        b = 0 if blank == "first" else C - 1
        total = 0.0
        for path in itertools.product(range(C), repeat=T):
            collapsed = [k for i, k in enumerate(path) if k != b and (i == 0 or path[i - 1] != k)]
            if collapsed == label:
                total += np.prod([p[t, k] for t, k in enumerate(path)])
        pad = 0 if blank == "first" else -1
        got = nd.CTCLoss(nd.array(scores, dtype="float64"), nd.array([label + [pad]]),
                         blank_label=blank).asnumpy()
        np.testing.assert_allclose(got, [-np.log(total)], rtol=1e-10)


def test_ctc_bad_inputs_are_refused():
    x = nd.zeros((3, 2, 4))
    with pytest.raises(ValueError, match="max number of labels"):
        nd.CTCLoss(x, nd.zeros((2, 4)))
    with pytest.raises(ValueError, match="blank"):
        nd.CTCLoss(x, nd.array([[3, -1], [1, -1]]), blank_label="last")
    with pytest.raises(ValueError, match="length arrays"):
        nd.CTCLoss(x, nd.array([[1, 0], [1, 0]]), use_data_lengths=True)
    with pytest.raises(ValueError, match="layouts"):
        L.CTCLoss(layout="NCT")
    with pytest.raises(ValueError, match="label_format"):
        L.LogisticLoss(label_format="pm1")


# ------------------------------------------------------------------------------------ configs
from trainer_cli.config import ConfigError, load_config, names  # noqa: E402
from trainer_cli.run.build import build_loss  # noqa: E402

CONFIG = """\
model: {name: mlp, args: {hidden: [4], classes: 3}}
data:
  train: {type: synthetic, task: classification, num_samples: 12, num_features: 3,
          num_classes: 3, seed: 5}
  batch_size: 4
loss: %s
optimizer: sgd
epochs: 1
"""


@pytest.mark.parametrize("loss_text,cls,attrs", [
    ("{name: kl_div, params: {from_logits: false, axis: 1}}", L.KLDivLoss,
     {"_from_logits": False, "_axis": 1}),
    ("{name: ctc, params: {layout: TNC, label_layout: TN, weight: 0.5}}", L.CTCLoss,
     {"_layout": "TNC", "_batch_axis": 1, "_weight": 0.5}),
    ("{name: hinge, params: {margin: 0.5}}", L.HingeLoss, {"_margin": 0.5}),
    ("{name: squared_hinge, params: {margin: 2.0}}", L.SquaredHingeLoss, {"_margin": 2.0}),
    ("{name: logistic, params: {label_format: binary}}", L.LogisticLoss,
     {"_label_format": "binary"}),
    ("{name: poisson_nll, params: {from_logits: false, compute_full: true}}", L.PoissonNLLLoss,
     {"_from_logits": False, "_compute_full": True}),
    ("{name: sdml, params: {smoothing_parameter: 0.1}}", L.SDMLLoss, {"smoothing_parameter": 0.1}),
])
def test_losses_from_configs(tmp_path, loss_text, cls, attrs):
    path = tmp_path / "c.yaml"
    path.write_text(CONFIG % loss_text)
    loss = build_loss(load_config(path, check_files=False), path)
    assert type(loss) is cls
    for key, value in attrs.items():
        assert getattr(loss, key) == value


def test_config_names_and_refusals(tmp_path):
    listed = set(names.loss_names())
    assert {"kl_div", "ctc", "hinge", "squared_hinge", "logistic", "triplet", "poisson_nll",
            "cosine_embedding", "sdml"} <= listed
    path = tmp_path / "c.yaml"
    for text in ("{name: hinge, params: {margn: 1}}", "{name: ctc, params: {layout: NCT}}"):
        path.write_text(CONFIG % text)
        with pytest.raises(ConfigError):
            load_config(path, check_files=False)
    for name in ("triplet", "cosine_embedding"):
        path.write_text(CONFIG % name)
        with pytest.raises(ConfigError, match="takes 3 input arrays"):
            build_loss(load_config(path, check_files=False), path)


def test_cosine_embedding_and_sdml_take_float64():
    # MXNet 1.9.1's fail on float64 inputs (float32 constants beside float64 data); here they
    # compute in float64: the cosine loss is 1 - cos for similar pairs, max(0, cos - margin) else.
    rng = np.random.RandomState(5)
    a, b = rng.uniform(-1, 1, size=(4, 3)), rng.uniform(-1, 1, size=(4, 3))
    label = np.array([1.0, -1.0, 1.0, -1.0])
    got = L.CosineEmbeddingLoss(margin=0.1)(
        nd.array(a, dtype="float64"), nd.array(b, dtype="float64"),
        nd.array(label, dtype="float64"))
    cos = (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
    assert got.dtype == np.float64
    np.testing.assert_allclose(got.asnumpy()[:, 0], np.where(label == 1, 1 - cos,
                                                       np.maximum(0, cos - 0.1)), rtol=1e-12)
    sdml = L.SDMLLoss()(nd.array(a, dtype="float64"), nd.array(b, dtype="float64"))
    assert sdml.dtype == np.float64 and np.isfinite(sdml.asnumpy()).all()
