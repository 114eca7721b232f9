"""The training runner behind the CLI: building from a config, the loop, run directories."""
