"""The package's version (the same as ``pyproject.toml``'s), in a module that imports nothing, so
that any layer may name it without importing the package's top."""

__version__ = "0.1.0"
