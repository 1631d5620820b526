"""The ``labelgate`` command line."""
