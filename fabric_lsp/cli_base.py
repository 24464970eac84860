"""What the CLI's entry (cli.py) and its full parser (cli_parser.py) share: the quick
commands and the logging set-up. Imports nothing but `sys` (a memory read a running server
answers loads no more than this)."""

from __future__ import annotations

import sys

# The memory reads: their latency is mostly this process' start, so only their own module
# is imported (not every subcommand's), and a running server answers them over the local
# socket (fabric_lsp/local_socket.py). command -> module under fabric_lsp.commands
FAST_COMMANDS = {"recall": "memory", "expand": "memory", "sessions": "memory", "history": "history"}


def configure_logging(log_file: str | None, verbosity: int) -> None:
    import logging  # here: a memory read a server answers never loads it

    level = logging.WARNING if verbosity == 0 else logging.INFO if verbosity == 1 else logging.DEBUG
    handler: logging.Handler
    if log_file:
        handler = logging.FileHandler(log_file, encoding="utf-8")
    else:
        handler = logging.StreamHandler(sys.stderr)  # never stdout: it carries JSON-RPC
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
