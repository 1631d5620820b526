"""LabelGate's Great Expectations file projects, which fail closed in every process.

GX drops an expectation whose type is not registered in the running process and reports the rest as a success, so
a checkpoint saved with LabelGate's expectations and run by a process that never imported ``labelgate.gx`` would pass
without them. GX has no entry-point plugin registry, but it builds every store from its ``module_name`` and
``class_name`` in ``great_expectations.yml``. A project made by :func:`project_context` names this module as the
backend of its expectations store, so any process that opens the project — LabelGate or a plain GX script — imports
``labelgate.gx`` (registering every LabelGate expectation) before it reads a suite; where LabelGate is not installed
the project does not open at all. Either way no suite naming LabelGate's expectations can pass without them.

>>> import tempfile
>>> with tempfile.TemporaryDirectory() as root:
...     context = project_context(root)
...     type(context.expectations_store.store_backend).__name__
'LabelGateStoreBackend'
"""

from __future__ import annotations

import os
import shutil
import threading
import uuid
from pathlib import Path
from typing import Any

import great_expectations as gx
from great_expectations.data_context.store import TupleFilesystemStoreBackend

import labelgate.gx  # noqa: F401  # importing this module registers every LabelGate expectation

_PLAIN = """  expectations_store:
    class_name: ExpectationsStore
    store_backend:
      class_name: TupleFilesystemStoreBackend"""
_OURS = """  expectations_store:
    class_name: ExpectationsStore
    store_backend:
      module_name: labelgate.gx.project
      class_name: LabelGateStoreBackend"""


# GX reads and writes a project's YAML through one module-level ruamel parser, which is not thread-safe: two gate
# runs opening their projects at once in one process (threads of a flow or a served gate) fail inside the parser.
_GX_CONTEXT_LOCK = threading.Lock()


class LabelGateStoreBackend(TupleFilesystemStoreBackend):
    """GX's filesystem store backend; GX imports it by name, which registers LabelGate's expectations first."""


def project_context(root: str | Path) -> Any:
    """A GX file context under ``root`` whose expectations store is :class:`LabelGateStoreBackend`.

    Creates the project on first use (GX's scaffold, then the store's backend is named) and opens it afterwards.
    """
    root = Path(root)
    with _GX_CONTEXT_LOCK:
        context = gx.get_context(mode="file", project_root_dir=str(root))
        if isinstance(context.expectations_store.store_backend, LabelGateStoreBackend):
            return context
        config = Path(context.root_directory) / "great_expectations.yml"
        text = config.read_text(encoding="utf-8")
        if _PLAIN not in text:  # a project this module did not make: leave it alone, but say so
            raise RuntimeError(f"{config} is not a LabelGate GX project (its expectations store was changed).")
        config.write_text(text.replace(_PLAIN, _OURS), encoding="utf-8")
        return gx.get_context(mode="file", project_root_dir=str(root))


def share_static_assets(context: Any, shared: str | Path) -> Path | None:
    """Replace the Data Docs site's static assets (GX's fonts, images and styles, ≈4 MB) by a link to one shared copy.

    Every GX project writes the same assets next to its Data Docs; a gate run writes one project, so a folder of
    run reports would hold one copy per run. The first call copies them to ``shared`` (atomically: concurrent runs
    race on a rename, and the loser drops its copy); every call then links the site's ``static`` folder to it by a
    relative path, so the site still opens from disk. Returns the shared folder, or None when the site has none.
    """
    static = Path(context.root_directory) / "uncommitted" / "data_docs" / "local_site" / "static"
    if not static.is_dir() or static.is_symlink():
        return None
    shared = Path(shared)
    if not shared.is_dir():
        shared.parent.mkdir(parents=True, exist_ok=True)
        staging = shared.with_name(f"{shared.name}.{uuid.uuid4().hex}")
        shutil.copytree(static, staging)
        try:
            staging.rename(shared)
        except OSError:  # another run made it first
            shutil.rmtree(staging, ignore_errors=True)
    shutil.rmtree(static)
    static.symlink_to(os.path.relpath(shared, static.parent), target_is_directory=True)
    return shared
