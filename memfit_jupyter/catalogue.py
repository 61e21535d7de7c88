"""The old import path of ``study/catalogue.py`` (``from memfit_jupyter.catalogue import ...``): the same
module object, so that code and saved notebooks written against it keep working."""

import sys

from .study import catalogue as _module

sys.modules[__name__] = _module
