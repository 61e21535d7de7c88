"""The Jupyter layer: magics, the live run widget and the saved output bundle.

This is the only layer that imports IPython and ipywidgets.  Modules:

- ``config``: the ``MemfitMagics`` settings (``%config MemfitMagics.model = ...``),
  model choice and ``.env`` loading.
- ``magics``: ``%%memfit_task``, ``%memfit`` and the ``%memfit_memory`` registration.
- ``state``: folds a run's events into what a person sees (cards, panels, gauges).
- ``html``: self-contained ``text/html`` and ``text/plain`` renderings of a trace.
- ``widget``: the live ipywidgets view of a run, with step and approval controls.
- ``display``: the output bundle (``application/vnd.memfit.run+json`` and friends).
- ``ipython``: typed doors to IPython's magic decorators, ``display`` and the shell.
"""

from ..trace import RUN_MIME as RUN_MIME  # the type a notebook keeps a run under
