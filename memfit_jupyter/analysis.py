"""The old import path of ``study/analysis.py`` (``from memfit_jupyter.analysis import ...``): the same
module object, so that code and saved notebooks written against it keep working."""

import sys

from .study import analysis as _module

sys.modules[__name__] = _module
