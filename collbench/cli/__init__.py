"""The `collbench` command line (typer only): each command parses, calls the library, renders.

`collbench.cli:main` is the console-script entry point; the commands live in `app.py` and one
module per command group.
"""

from collbench.cli.app import app, main

__all__ = ["app", "main"]
