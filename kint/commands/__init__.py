"""The `kint` command's subcommands, one module per concern; each command's docstring is
its `--help`."""
