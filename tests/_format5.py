"""Saved model files rewritten as a test needs them: :func:`rewrite` changes a file's JSON
document (the tests of tests/io), and :func:`as_format5` writes a file as
gplvm wrote it in format 5 (before issue 33's typed state): the run state a dict attribute
``_resume_`` among the fitted attributes, not the document's ``fit_state``; the SVI run under
``_resume_["svi"]`` (test_checkpoint and test_svi check such files still load and resume)."""

from __future__ import annotations

import json
import shutil

import numpy as np

from gplvm import io as gio


def rewrite(path, change, reseal: bool = True) -> None:
    """Apply ``change`` to the file's JSON document and write the file back.

    ``reseal``: make the file what a gplvm of the document's format would have written -- its
    ``document_sha256`` recomputed (format 4), or the checksums that its older format did not
    have removed -- so that a test reaches the loader's other checks; False leaves them as
    they were, as an editor of the file would."""
    with np.load(path, allow_pickle=False) as archive:
        entries = {name: archive[name] for name in archive.files}
    document = json.loads(entries["__gplvm__"].tobytes().decode("utf-8"))
    change(document)
    version = document.get("format_version")
    if reseal and type(version) is int:
        if version < 4:
            document.pop("document_sha256", None)
        if version < 3:
            document.pop("payload_sha256", None)
        if version >= 4 and "document_sha256" in document:
            document["document_sha256"] = gio.document_sha256(document)
    entries["__gplvm__"] = np.frombuffer(json.dumps(document).encode(), dtype=np.uint8)
    with open(path, "wb") as file:
        np.savez(file, **entries)


def _to_format5(document) -> None:
    """The document as format 5 wrote it: the run state moved into ``_resume_``."""
    state = document.pop("fit_state")
    if state is not None:
        fields = state["fields"]
        run = {"$": "dict", "keys": list(fields), "values": list(fields.values())}
        if state["class"] == "gplvm.state.SviFitState":
            run = {"$": "dict", "keys": ["svi"], "values": [run]}
        document["fitted"]["_resume_"] = run
    document["format_version"] = 5


def as_format5(path, to) -> None:
    """Write the format-5 form of the (current format) model file ``path`` to ``to``."""
    shutil.copyfile(path, to)
    rewrite(to, _to_format5)
