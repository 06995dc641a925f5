"""CLI subcommands: one module each, discovered by ``graphstream.cli``."""
