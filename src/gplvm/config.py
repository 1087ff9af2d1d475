"""Process-wide settings of gplvm: the precision (float64 or float32), the persistent
compilation cache and XLA's options for the MCMC blocks compiled for CPU.  The details, and the environment variables read at ``import gplvm``
(``GPLVM_PRECISION``, ``GPLVM_COMPILATION_CACHE``, ``GPLVM_CPU_DEVICES``), are in
:mod:`gplvm._config`.

Example::

    import gplvm
    with gplvm.config.precision("float32"):     # e.g. on a GPU
        model = gplvm.BayesianGPLVM().fit(Y)
"""

from gplvm._config import (
    PRECISIONS, cpu_compiler_options, default_cache_dir, disable_compilation_cache,
    enable_compilation_cache, float_dtype, get_precision, precision, set_cpu_fusion_emitters,
    set_precision,
)

__all__ = ["PRECISIONS", "cpu_compiler_options", "default_cache_dir",
           "disable_compilation_cache", "enable_compilation_cache", "float_dtype",
           "get_precision", "precision", "set_cpu_fusion_emitters", "set_precision"]
