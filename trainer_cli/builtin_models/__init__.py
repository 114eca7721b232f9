"""The models that ship with trainer-cli (``model: mlp`` and the others ``trainer list`` shows).

Each is a plain file with a ``build(**args)`` factory, loaded by path exactly like a user's
``models/<name>.py`` (:mod:`trainer_cli.run.model`); a user's file of the same name, in a
``models/`` folder beside the config or in the working directory, takes precedence. They live in
the package so that a wheel install has them.
"""
