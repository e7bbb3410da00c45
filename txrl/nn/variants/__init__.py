"""Alternative transformer backbones for ablations, one module per paper.

Importing this package registers every module's backbones with :func:`txrl.make_backbone`.
"""

import importlib
import pkgutil

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")
