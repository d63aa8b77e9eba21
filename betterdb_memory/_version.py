"""The single place the package version lives (hatch reads it at build time)."""

__version__ = "0.1.0"
