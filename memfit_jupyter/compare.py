"""The old import path of ``study/compare.py`` (``from memfit_jupyter.compare import ...``): the same
module object, so that code and saved notebooks written against it keep working."""

import sys

from .study import compare as _module

sys.modules[__name__] = _module
