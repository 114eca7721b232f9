"""What the reporting commands (validate, schema, lr, inspect, list) compute and print.

Each module builds a plain JSON-able dict from the library (``--json`` prints it as it is) and
``render`` turns those dicts into rich tables and plots; the click commands only call the two.
Nothing here writes anything, executes a model file, or unpickles what it reads.

Modules are imported where used, so that ``trainer schema`` does not load the training stack:

- ``validate``: a config, validated and resolved;
- ``schedule``: the learning rate per step, from the optimizer a run would build;
- ``dataset_size``: how many optimizer steps a config's epochs make;
- ``plot``: the compact table rows and the terminal plot of a schedule;
- ``inspect_states`` / ``inspect_run``: a trainer states file, a run directory;
- ``catalog``: everything a config can name;
- ``jsonout``: strict JSON out, and errors as JSON;
- ``render``: rich output of all of the above.
"""
