"""The RFLVM's upgrades of files saved by earlier versions of gplvm now live in
:mod:`gplvm.io.legacy.rflvm` (issue 33: one legacy module); these names stay for
:mod:`.estimator`, which imports them from here."""

from gplvm.io.legacy.rflvm import current_layouts
from gplvm.io.legacy.rflvm import upgrade_rflvm as upgrade_fitted

__all__ = ["current_layouts", "upgrade_fitted"]
