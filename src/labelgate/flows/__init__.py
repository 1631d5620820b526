"""Prefect flows: thin tasks over the pure steps of :mod:`labelgate.gate.steps` (and, later, monitoring)."""
