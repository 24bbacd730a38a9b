"""Loading Hugging Face hub datasets with ``datasets``, failing at once (not after a minute of retries) when offline.

``datasets`` retries a hub name for 23–70 s before failing when the machine has no internet; with
``HF_DATASETS_OFFLINE=1``/``HF_HUB_OFFLINE=1`` it fails at once. ``load_hub_dataset`` checks those flags and, when they
are unset, probes the hub with one short TCP connection, then raises ``HubUnavailableError`` whose message names the
local formats a reader accepts instead.
"""

from __future__ import annotations

import logging
import os
import socket
from typing import Any

log = logging.getLogger("polysent.pipelines.hub")
HUB_HOST = ("huggingface.co", 443)


class HubUnavailableError(RuntimeError):
    pass


def _truthy(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in {"1", "true", "yes", "on"}


def hub_reachable(timeout: float = 3.0) -> bool:
    if _truthy("HF_HUB_OFFLINE") or _truthy("HF_DATASETS_OFFLINE"):
        return False
    try:
        with socket.create_connection(HUB_HOST, timeout=timeout):
            return True
    except OSError:
        return False


def load_hub_dataset(hub_id: str, config: str | None, split: str, local_formats: str, **kwargs: Any) -> Any:
    """``datasets.load_dataset(hub_id, config, split=split)``, or a clear error naming ``local_formats``.

    A dataset already in the local ``datasets`` cache loads even when offline.
    """
    import datasets
    import datasets.config
    import huggingface_hub.constants

    what = f"{hub_id}" + (f" (config {config!r}, split {split!r})" if config else f" (split {split!r})")
    # the libraries read the offline flags at import time: set them on the modules for this call
    flags = [(datasets.config, "HF_DATASETS_OFFLINE"), (datasets.config, "HF_HUB_OFFLINE"),
             (huggingface_hub.constants, "HF_HUB_OFFLINE")]
    saved = [getattr(mod, name) for mod, name in flags]
    try:
        if not hub_reachable():
            for mod, name in flags:
                setattr(mod, name, True)
        return datasets.load_dataset(hub_id, config, split=split, **kwargs)
    except Exception as exc:
        raise HubUnavailableError(
            f"hub dataset {what} could not be loaded ({type(exc).__name__}: {str(exc)[:200]}); the hub is not "
            f"reachable from this machine and the dataset is not in the local cache. Use a local file instead: "
            f"{local_formats}") from None
    finally:
        for (mod, name), value in zip(flags, saved, strict=True):
            setattr(mod, name, value)
