"""The gate: its steps and decision policy as plain functions, runnable without Prefect.

``labelgate.gate.run(config, batch, trusted)`` gates one batch and returns its summary (:mod:`labelgate.gate.runner`).
"""

from labelgate.gate.runner import EXIT_CODES, Hooks, run

__all__ = ["EXIT_CODES", "Hooks", "run"]
