"""CLI subcommands: one module each, listed in ``graphstream.cli.COMMANDS`` (imported only when run)."""
