"""The whole Trainer tutorial and guide run with only ``mxnet`` -> ``trainer_cli`` in their imports."""
import re

import numpy as np

from tutorial_cells import python_cells


def _port(cell):
    return re.sub(r"^(\s*(?:from|import)\s+)mxnet\b", r"\1trainer_cli", cell, flags=re.M)


def _run_cells(name):
    """Execute every cell in one namespace, recording each cell's last expression's value."""
    path, cells = python_cells(name)
    ns, values = {}, []
    for cell in cells:
        code = _port(cell).rstrip()
        lines = code.splitlines()
        last = lines[-1] if lines else ""
        is_expr = last and not last.startswith((" ", "\t")) and "=" not in last.split("(")[0] \
            and not last.startswith(("from ", "import ", "def ", "print(", "forward_backward("))
        body = "\n".join(lines[:-1]) if is_expr else code
        exec(compile(body + "\n", str(path), "exec"), ns)
        value = eval(last, ns) if is_expr else None
        # net.weight.data() is the live weight, which later cells update in place.
        values.append(value.copy() if hasattr(value, "asnumpy") else value)
    return ns, values


def test_tutorial_runs_and_step_equals_explicit_sgd():
    ns, values = _run_cells("trainer-tutorial.md")
    # Cell 4 prints the weight after trainer.step; cell 5 computes the explicit SGD update.
    stepped, explicit = values[3], values[4]
    np.testing.assert_allclose(stepped.asnumpy(), explicit.asnumpy(), rtol=1e-6, atol=1e-7)
    assert repr(stepped).endswith("<NDArray 1x4 @cpu(0)>")
    # Adam with lr 1 moves every weight by about one learning rate on its first step.
    adam_weight = values[6].asnumpy()
    np.testing.assert_allclose(np.abs(adam_weight - stepped.asnumpy()), 1.0, rtol=1e-3)
    assert values[7] == 1
    assert values[8] == 0.1


def test_guide_runs_and_learning_rate_changes(capsys):
    ns, values = _run_cells("trainer-guide.md")
    printed = capsys.readouterr().out
    assert "<NDArray 1x4 @cpu(0)>" in printed
    trainer = ns["trainer"]
    assert trainer.learning_rate == 0.1
    assert values[-2] == 1 and values[-1] == 0.1
