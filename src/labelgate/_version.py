"""The package version, at the bottom of the layers so that every layer may read it."""

__version__ = "0.1.0"
