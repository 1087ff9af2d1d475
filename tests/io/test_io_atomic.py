"""``save`` is atomic: a process killed while writing a model file leaves the previous file whole.

:func:`gplvm.io.save` encodes the model, then :func:`gplvm.io.write_atomic` writes the archive
under a temporary name beside the target, ``fsync``-s it and renames it onto the target.  Here a
forked child (it runs only NumPy and the file system, so it starts in milliseconds and needs no
second ``import gplvm``) writes a 32 MB model file over an older one, stops itself (SIGSTOP) as
soon as its temporary file holds 1 MB, and is killed there with SIGKILL: the kill lands
mid-write every time, on a busy machine too.  The target must then load as the old model,
never fail to load.
"""

from __future__ import annotations

import copy
import os
import signal
import warnings

import numpy as np
import pytest

import gplvm
from gplvm.io import model_file as gio

REPETITIONS = 20
BIG = 4_000_000                 # float64 entries of the new model's history_: 32 MB
MID_WRITE_BYTES = 1 << 20       # the child is killed once its temporary file holds this much


@pytest.fixture(scope="module")
def old_model(blr):
    """A small fitted model (tests/io/conftest.py's linear regression) and inputs to predict
    at."""
    return blr[0], blr[1]


def _temporaries(folder, base):
    return [e for e in os.scandir(folder) if e.name.startswith(f".{base}.")
            and e.name.endswith(".tmp")]


class _StopsMidWrite:
    """The archive's file, forwarding everything, except that once MID_WRITE_BYTES have been
    written the process stops itself (SIGSTOP) for the parent to kill: the kill lands mid-write
    every time, whatever the load on the machine (a parent polling the file's size can be
    descheduled until the child has finished)."""

    def __init__(self, file):
        self._file, self._written = file, 0

    def write(self, data):
        self._written += len(data)
        n = self._file.write(data)
        if self._written >= MID_WRITE_BYTES:
            self._file.flush()
            os.kill(os.getpid(), signal.SIGSTOP)
        return n

    def __getattr__(self, name):
        return getattr(self._file, name)


def _kill_mid_write(path, entries):
    """Fork a child that writes ``entries`` to ``path`` atomically and stops itself once its
    temporary file holds MID_WRITE_BYTES; SIGKILL it there.  Returns whether the kill came
    before the rename (its temporary file is left behind)."""
    folder, base = os.path.split(str(path))
    with warnings.catch_warnings():     # JAX warns that forking may deadlock a child that
        warnings.simplefilter("ignore", RuntimeWarning)     # uses JAX; this one never does
        pid = os.fork()
    if pid == 0:                                    # the child: write, then leave at once
        try:
            savez = np.savez
            np.savez = lambda file, **kw: savez(_StopsMidWrite(file), **kw)
            gio.write_atomic(path, entries)
        finally:
            os._exit(0)
    _, status = os.waitpid(pid, os.WUNTRACED)      # no time-out: it stops or it exits
    if os.WIFSTOPPED(status):
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    left = _temporaries(folder, base)
    for entry in left:
        os.unlink(entry.path)
    return bool(left)


def test_a_saver_killed_mid_write_leaves_the_previous_file(old_model, tmp_path):
    model, X = old_model
    expected = np.asarray(model.predict(X))
    new = copy.copy(model)
    new.history_ = np.random.default_rng(0).normal(size=BIG)     # a declared field, made big
    entries = gio._entries(new)
    path = tmp_path / "model.gplvm"
    outcomes = {"old file": 0, "new file": 0}
    mid_write = 0
    for _ in range(REPETITIONS):
        model.save(path)
        mid_write += _kill_mid_write(path, entries)
        loaded = gplvm.load(path)                   # never an incomplete file
        np.testing.assert_array_equal(loaded.predict(X), expected)
        if loaded.history_.shape == (BIG,):
            np.testing.assert_array_equal(loaded.history_, new.history_)
            outcomes["new file"] += 1
        else:
            outcomes["old file"] += 1
    print(f"\nkill during save: {REPETITIONS} repetitions, {mid_write} killed mid-write; "
          f"outcomes {outcomes}")
    # the kill really lands mid-write (else this test shows nothing), and a saver killed
    # mid-write can only leave the old file
    assert mid_write == REPETITIONS and outcomes["old file"] == REPETITIONS
    gio.write_atomic(path, entries)                 # left to finish, the save is complete
    np.testing.assert_array_equal(gplvm.load(path).history_, new.history_)


def test_a_save_that_fails_leaves_the_previous_file_and_no_temporary(old_model, tmp_path,
                                                                      monkeypatch):
    model, X = old_model
    path = tmp_path / "model.gplvm"
    model.save(path)
    before = path.read_bytes()

    def fails_halfway(file, **entries):
        file.write(b"PK\x03\x04 half an archive")
        raise OSError("disk full")

    monkeypatch.setattr(gio.np, "savez", fails_halfway)
    with pytest.raises(OSError, match="disk full"):
        model.save(path)
    assert path.read_bytes() == before and os.listdir(tmp_path) == ["model.gplvm"]


def test_saved_file_has_the_permissions_open_gives(old_model, tmp_path):
    """The temporary file is created like ``open(path, "wb")`` would create ``path`` (the
    user's umask applies), not private like ``tempfile``'s 0600."""
    model, _ = old_model
    model.save(tmp_path / "model.gplvm")
    (tmp_path / "plain").write_bytes(b"")       # open(path, "wb") under the same umask
    assert (tmp_path / "model.gplvm").stat().st_mode == (tmp_path / "plain").stat().st_mode
