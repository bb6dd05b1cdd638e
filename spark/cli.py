"""Entry point the `samsa` CLI (broker/cli/) imports: ``samsa demo [produce|pipeline]``.

Kept tiny and free of pyspark imports so `samsa --help` stays fast and works without the
`spark` extra; pyspark is imported only when a demo or pipeline command actually runs.
"""

from __future__ import annotations

from .demo import add_demo_subcommands, main

__all__ = ["add_demo_subcommands", "main"]
