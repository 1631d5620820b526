"""Prefect flows: thin tasks over the pure steps of :mod:`labelgate.gate` (and, later, monitoring)."""
