"""Record regimes.json with real MXNet 1.9.1 (run in a venv that has it, numpy<1.24):

    python tests/data/mxnet_regimes/make_regimes.py

The cases are in regimes.py, which the test suite replays with trainer_cli in MXNet's place.
"""
import json
import os
import sys

import mxnet

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import regimes  # noqa: E402

assert mxnet.__version__ == "1.9.1", mxnet.__version__
result = {"mxnet": mxnet.__version__, "regimes": regimes.run_all(mxnet)}
with open(os.path.join(HERE, "regimes.json"), "w") as f:
    json.dump(result, f, sort_keys=True)
    f.write("\n")
