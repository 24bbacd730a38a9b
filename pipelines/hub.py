"""Loading Hugging Face hub datasets with ``datasets``, failing at once (not after a minute of retries) when offline.

``datasets`` retries a hub name for 23–70 s before failing when the machine has no internet; in offline mode it fails
at once. Offline mode is the libraries' own documented setting, the environment variables ``HF_HUB_OFFLINE``
(``huggingface_hub``) and ``HF_DATASETS_OFFLINE`` (``datasets``), which both libraries read once, when they are
imported. :func:`settle_offline_mode` decides it once per process: offline when either variable is set true, online
when one is set false, and, when neither is set, offline when one short TCP connection to the hub fails; an offline
decision is written into both variables. A pipeline run settles it before any node starts
(``flows.run.run_pipeline``), so nodes built at once on the threads runner (xnli, nli, bitext, eval_sets) share one
decision and none changes it while another loads; worker processes inherit it through the environment. A reader called
directly settles it on its first hub load.

:func:`load_hub_dataset` then loads, or raises ``HubUnavailableError`` whose message names the local formats a reader
accepts instead. Nothing here assigns to an attribute of either library.
"""

from __future__ import annotations

import logging
import os
import socket
import sys
import threading
from collections.abc import Callable, Mapping
from typing import Any

log = logging.getLogger("polysent.pipelines.hub")
HUB_HOST = ("huggingface.co", 443)
OFFLINE_VARIABLES = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")
# the modules that read the variables at import, and the name each keeps its reading under
_LIBRARY_FLAGS = (("huggingface_hub.constants", "HF_HUB_OFFLINE"), ("datasets.config", "HF_HUB_OFFLINE"))

_settle_lock = threading.Lock()
_settled: list[bool] = []  # the process's decision, once made


class HubUnavailableError(RuntimeError):
    pass


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in {"1", "true", "yes", "on"}


def hub_reachable(timeout: float = 3.0) -> bool:
    """Whether one TCP connection to the hub opens within ``timeout`` seconds."""
    try:
        with socket.create_connection(HUB_HOST, timeout=timeout):
            return True
    except OSError:
        return False


def offline_wanted(environ: Mapping[str, str], reachable: Callable[[], bool] = hub_reachable) -> bool:
    """Offline when ``HF_HUB_OFFLINE`` or ``HF_DATASETS_OFFLINE`` is set true in ``environ``; online when one is set
    and neither is true (the caller asked for the hub); with neither set, offline when the hub cannot be reached
    (``reachable`` is asked only then)."""
    values = [environ.get(name, "").strip() for name in OFFLINE_VARIABLES]
    if any(_truthy(v) for v in values):
        return True
    return False if any(values) else not reachable()


def settle_offline_mode() -> bool:
    """Decide once per process whether ``datasets`` and ``huggingface_hub`` run offline (:func:`offline_wanted`) and
    write an offline decision into both environment variables; later calls return the first decision and change
    nothing. Call it before any thread that loads from the hub starts, and before the libraries are imported: they
    read the variables at import (a library imported earlier with the opposite reading is logged; its loads then
    retry before failing)."""
    with _settle_lock:
        if not _settled:
            offline = offline_wanted(os.environ)
            if offline:
                os.environ.update(dict.fromkeys(OFFLINE_VARIABLES, "1"))
                read_online = [f"{module}.{name}" for module, name in _LIBRARY_FLAGS
                               if module in sys.modules and not getattr(sys.modules[module], name, True)]
                if read_online:
                    log.warning("offline, but %s read its flag as online when imported (before this decision): its "
                                "hub loads retry before they fail", ", ".join(read_online))
            _settled.append(offline)
        return _settled[0]


def load_hub_dataset(hub_id: str, config: str | None, split: str, local_formats: str, **kwargs: Any) -> Any:
    """``datasets.load_dataset(hub_id, config, split=split)``, or a clear error naming ``local_formats``.

    A dataset already in the local ``datasets`` cache loads even when offline.
    """
    settle_offline_mode()
    import datasets

    what = f"{hub_id}" + (f" (config {config!r}, split {split!r})" if config else f" (split {split!r})")
    try:
        return datasets.load_dataset(hub_id, config, split=split, **kwargs)
    except Exception as exc:
        raise HubUnavailableError(
            f"hub dataset {what} could not be loaded ({type(exc).__name__}: {str(exc)[:200]}); the hub is not "
            f"reachable from this machine and the dataset is not in the local cache. Use a local file instead: "
            f"{local_formats}") from None
