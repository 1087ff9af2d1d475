"""The checkpoint file of a fit and the lock that keeps it to one process (issue 16, item 4).

An estimator built with ``checkpoint=path`` holds ``path`` while it fits (:func:`checkpoint_lock`:
an advisory ``fcntl.flock`` on ``.<name>.lock`` beside it, released by the system when the
process ends); a second process fitting to the same file is refused at once with
:class:`CheckpointInUseError`, naming the process that holds it.  Tools that write or watch a
checkpoint themselves (``scripts/robustness_audit.py``) take the same lock from here.  How
fits save and resume is described in :mod:`gplvm.models._checkpoint`.
"""

from gplvm.models._checkpoint import CheckpointInUseError, checkpoint_lock

__all__ = ["CheckpointInUseError", "checkpoint_lock"]
