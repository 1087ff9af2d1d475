"""A saved model file as gplvm wrote it in format 5 (before issue 33's typed state): the run
state a dict attribute ``_resume_`` among the fitted attributes, not the document's
``fit_state``; the SVI run under ``_resume_["svi"]``.  Used by the tests that check such files
still load and resume (test_checkpoint, test_svi)."""

from __future__ import annotations

import json

import numpy as np

from gplvm import io as gio


def as_format5(path, to) -> None:
    """Write the format-5 form of the (format 6) model file ``path`` to ``to``."""
    with np.load(path, allow_pickle=False) as archive:
        entries = {name: archive[name] for name in archive.files}
    document = json.loads(entries["__gplvm__"].tobytes().decode("utf-8"))
    state = document.pop("fit_state")
    if state is not None:
        fields = state["fields"]
        run = {"$": "dict", "keys": list(fields), "values": list(fields.values())}
        if state["class"] == "gplvm.state.SviFitState":
            run = {"$": "dict", "keys": ["svi"], "values": [run]}
        document["fitted"]["_resume_"] = run
    document["format_version"] = 5
    document["document_sha256"] = gio.document_sha256(document)
    entries["__gplvm__"] = np.frombuffer(json.dumps(document).encode(), dtype=np.uint8)
    with open(to, "wb") as file:
        np.savez(file, **entries)
