"""Studying runs after the fact: ``analysis`` (a trace or another agent's trajectory through the
reflection and spin detectors), ``compare`` (two runs side by side), ``catalogue`` (the failure
modes of the scripted scenarios, each with its mechanism on and off) and ``intervention``
(``blame``: the smallest change that turns a failed run into a passing one).

These are applications of the engine: they import it, and nothing in the engine or the feature
packages imports them.  The package's top names the functions lazily (``memfit_jupyter.compare``,
``memfit_jupyter.analyze``, ...).
"""
