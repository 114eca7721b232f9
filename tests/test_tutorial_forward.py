"""The forward/backward cell of the MXNet Trainer tutorial runs with only its import changed."""
import re

import numpy as np

from tutorial_cells import python_cells


def _port(cell):
    """The cell with ``mxnet`` replaced by ``trainer_cli`` in its import lines and nowhere else."""
    lines = cell.splitlines()
    imports = [i for i, line in enumerate(lines) if re.match(r"\s*(from|import)\s+mxnet\b", line)]
    assert imports, "the tutorial cell no longer imports mxnet"
    for i in imports:
        lines[i] = re.sub(r"\bmxnet\b", "trainer_cli", lines[i])
    return "\n".join(lines) + "\n"


def test_tutorial_cell_gives_analytic_l2_gradient(ctx):
    path, cells = python_cells("trainer-tutorial.md")
    code = _port(cells[0])
    ns = {}
    # The cell creates its arrays and parameters on the current context, so this runs it on ctx.
    with ctx:
        exec(compile(code, str(path), "exec"), ns)
    net, X, y, batch_size = ns["net"], ns["X"], ns["y"], ns["batch_size"]
    assert net.weight.data().context == ctx

    x = X.asnumpy().astype(np.float64)
    w = net.weight.data().asnumpy().astype(np.float64)
    b = net.bias.data().asnumpy().astype(np.float64)
    target = y.asnumpy().astype(np.float64)
    assert x.shape == (batch_size, 4) and w.shape == (1, 4) and b.shape == (1,)

    # L2Loss is (pred - y)^2 / 2 per sample; backward of the per-sample losses sums over the batch.
    residual = x @ w.T + b - target[:, None]
    np.testing.assert_allclose(net.weight.grad().asnumpy(), residual.T @ x, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(net.bias.grad().asnumpy(), residual.sum(axis=0), rtol=1e-5, atol=1e-6)
    assert net.weight.grad().dtype == np.float32

    # Running the cell's function again overwrites (grad_req='write'), it does not accumulate.
    before = net.weight.grad().asnumpy()
    ns["forward_backward"]()
    np.testing.assert_array_equal(net.weight.grad().asnumpy(), before)
    assert all(d._fresh_grad for d in net.weight.list_data())
