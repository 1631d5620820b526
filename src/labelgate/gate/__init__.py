"""The gate: its steps and decision policy as plain functions, runnable without Prefect.

``labelgate.gate.run(config, batch, trusted)`` gates one batch and returns its summary (:mod:`labelgate.gate.runner`).
"""

from typing import Any

from labelgate.gate.decision import EXIT_CODES

__all__ = ["EXIT_CODES", "Hooks", "run"]


def __getattr__(name: str) -> Any:
    # the runner imports pandas and pandera: loaded when the gate runs, not when the CLI reads EXIT_CODES
    if name in ("Hooks", "run"):
        from labelgate.gate import runner

        return getattr(runner, name)
    raise AttributeError(f"module 'labelgate.gate' has no attribute {name!r}")
