"""Alternative correct implementations of the exercises, one module per lesson; the checks
must accept every one. ALTERNATIVES merges each module's own ALTERNATIVES dict."""

import importlib
import pkgutil

ALTERNATIVES: dict[str, list] = {}
for _info in pkgutil.iter_modules(__path__):
    ALTERNATIVES.update(importlib.import_module(f"{__name__}.{_info.name}").ALTERNATIVES)
