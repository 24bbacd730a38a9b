"""Weight-space interpolation of a fine-tuned model with the model it started from (WiSE-FT).

Paper: Wortsman, Ilharco, Kim, Li, Kornblith, Roelofs, Gontijo-Lopes, Hajishirzi, Farhadi, Namkoong, Schmidt 2022,
"Robust fine-tuning of zero-shot models" (CVPR; arXiv 2109.01903), §2: the weight-space ensemble

    θ_α = (1 − α) · θ_start + α · θ_ft,        α ∈ [0, 1]

(α = 0: the start, α = 1: the fine-tuned model), with α chosen on held-out data; averaging fine-tuned weights is
also the uniform "model soup" (Wortsman et al. 2022, ICML, arXiv 2203.05482). It costs no training, only the scoring
of each α: ``experiments.interpolation_sweep`` scores a list of α on a kit's decision sets.

Both models are sentence-transformers folders of the same architecture: the fine-tuned one trained from the start
(``encoder.pretrained``). Every weight file of the fine-tuned folder (the backbone's ``model.safetensors``, a Dense
module's) is interpolated tensor by tensor with the start's file of the same name, in float32, and stored in the
fine-tuned tensor's dtype; integer tensors (position ids) must be equal and are copied. 🤗's pooler, which sentence
embeddings never read and which polysent saves as the identity when the start has none (``models.export_files``),
is taken from the fine-tuned folder when the start lacks it, and integer buffers only the start holds (the
``embeddings.position_ids`` older 🤗 versions saved) are left out, as the fine-tuned folder leaves them. Anything else
that differs — a tensor or a weight file
only one side has (a ``projection`` added in training), a shape — is refused with the file and the tensor named.
The other files (tokenizer, modules, prompts, ``sentence_bert_config.json``) are the fine-tuned folder's.

The output folder holds ``polysent_interpolation.json``, the lineage: α, the formula, and each parent by name and
the sha256 of its weight files. ``interpolate_folders`` writes it under a temporary name beside the target and renames
it into place. Needs torch and safetensors only.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from models.lazy_torch import torch

log = logging.getLogger("polysent.models.interpolation")

LINEAGE_FILE = "polysent_interpolation.json"
FORMULA = "θ = (1 − α)·θ_start + α·θ_finetuned"
PAPER = ("Wortsman et al. 2022, \"Robust fine-tuning of zero-shot models\" (WiSE-FT, CVPR)",
         "https://arxiv.org/abs/2109.01903")
FROM_FINETUNED_ONLY = ("pooler.",)  # tensors the start may lack (never read by sentence embeddings)


class InterpolationError(ValueError):
    """The two folders cannot be interpolated: the message names the file, the tensor and what was expected."""


@dataclass(frozen=True)
class Parent:
    """One parent of an interpolation: what it is called (a model id, a run) and its folder."""

    name: str
    folder: Path


def check_alpha(alpha: float, where: str = "alpha") -> float:
    """α as a float in [0, 1]; a clear error otherwise."""
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not math.isfinite(float(alpha)) \
            or not 0.0 <= float(alpha) <= 1.0:
        raise InterpolationError(f"{where}: {alpha!r} is not a weight of the fine-tuned model; expected a number in "
                                 "[0, 1] (0: the start, 1: the fine-tuned model)")
    return float(alpha)


def weight_files(folder: Path) -> list[str]:
    """The ``*.safetensors`` files of a sentence-transformers folder (relative POSIX paths, sorted)."""
    folder = Path(folder)
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*.safetensors") if p.is_file())


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with Path(path).open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def resolve_folder(model: str | Path) -> Path:
    """A start model's folder: a local folder as it is, a ``pkg:`` id through ``models.pretrained``, a hub id from
    the local Hugging Face cache (or the network)."""
    text = str(model)
    if text.startswith("pkg:"):
        from models.pretrained import resolve_model

        text = resolve_model(text)
    if Path(text).is_dir():
        return Path(text)
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(text))
    except Exception as exc:
        raise InterpolationError(f"start model {text!r}: neither a local folder nor a reachable hub id "
                                 f"({type(exc).__name__}: {exc})") from None


def _modules(folder: Path) -> list[str]:
    path = folder / "modules.json"
    if not path.is_file():
        raise InterpolationError(f"{path}: missing; expected a sentence-transformers folder (modules.json)")
    try:
        return [str(m["type"]).rsplit(".", 1)[-1] for m in json.loads(path.read_text(encoding="utf-8"))]
    except (ValueError, KeyError, TypeError) as exc:
        raise InterpolationError(f"{path}: not a sentence-transformers module list ({exc})") from None


def check_compatible(start: Path, finetuned: Path) -> list[str]:
    """The weight files to interpolate; ``InterpolationError`` when the folders differ in their modules or weight
    files."""
    start_mods, ft_mods = _modules(start), _modules(finetuned)
    if start_mods != ft_mods:
        raise InterpolationError(f"{finetuned / 'modules.json'}: modules {ft_mods}, but the start {start} has "
                                 f"{start_mods}; interpolation needs the same modules (an encoder.projection "
                                 "added in training has no start weights)")
    ft_files, start_files = weight_files(finetuned), set(weight_files(start))
    if not ft_files:
        raise InterpolationError(f"{finetuned}: no *.safetensors weight file; expected a sentence-transformers "
                                 "folder saved with safetensors")
    missing = [f for f in ft_files if f not in start_files]
    if missing:
        where = "pytorch_model.bin weights (convert them to safetensors)" if (start / "pytorch_model.bin").exists() \
            else "no such file"
        raise InterpolationError(f"{start}: {', '.join(missing)} missing ({where}); the fine-tuned model "
                                 f"{finetuned} has them")
    return ft_files


def _finetuned_only(name: str) -> bool:
    return any(name.startswith(p) or f".{p}" in name for p in FROM_FINETUNED_ONLY)


def interpolate_file(start: Path, finetuned: Path, alpha: float, out: Path, *, progress: Any = None) -> int:
    """θ_α of one safetensors file into ``out``; the number of tensors written."""
    from safetensors import safe_open
    from safetensors.torch import save_file

    result: dict[str, torch.Tensor] = {}
    with safe_open(str(finetuned), framework="pt") as ft, safe_open(str(start), framework="pt") as st:
        start_names = set(st.keys())
        meta = ft.metadata() or {}
        names = ft.keys()  # a safe_open handle is not iterable
        for name in names:
            b = ft.get_tensor(name)
            if name not in start_names:
                if _finetuned_only(name):
                    result[name] = b.contiguous()
                    continue
                raise InterpolationError(f"{start}: tensor {name!r} missing; the fine-tuned {finetuned} has it "
                                         f"({tuple(b.shape)}); interpolation needs the same tensors")
            a = st.get_tensor(name)
            if a.shape != b.shape:
                raise InterpolationError(f"{finetuned}: tensor {name!r} has shape {tuple(b.shape)}, the start's "
                                         f"({start}) {tuple(a.shape)}; expected the same architecture")
            if not b.is_floating_point():
                if not torch.equal(a, b.to(a.dtype)):
                    raise InterpolationError(f"{finetuned}: integer tensor {name!r} differs from the start's; "
                                             "expected equal buffers")
                result[name] = b.contiguous()
                continue
            mixed = torch.lerp(a.to(torch.float32), b.to(torch.float32), alpha)  # a + α·(b − a)
            result[name] = mixed.to(b.dtype).contiguous()
            if progress is not None:
                progress.update(1)
        # the start's tensors the fine-tuned folder lacks: its pooler, and integer buffers an older transformers saved
        # (``embeddings.position_ids``, non-persistent now) are not needed; a missing weight is an error
        extra = sorted(n for n in start_names - set(result)
                       if not _finetuned_only(n) and st.get_tensor(n).is_floating_point())
        if extra:
            raise InterpolationError(f"{finetuned}: tensor(s) {', '.join(extra[:5])} missing; the start {start} has "
                                     "them; interpolation needs the same tensors")
    save_file(result, str(out), metadata={**meta, "format": meta.get("format", "pt")})
    return len(result)


def write_interpolated(start: Parent, finetuned: Parent, alpha: float, out: Path, *,
                       progress: bool = False, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """θ_α into the existing (empty) folder ``out``: the fine-tuned folder's files, its weight files interpolated
    with the start's, and ``polysent_interpolation.json`` (returned). ``extra``: more lineage fields."""
    alpha = check_alpha(alpha)
    files = check_compatible(start.folder, finetuned.folder)
    out = Path(out)
    for src in sorted(finetuned.folder.rglob("*")):
        rel = src.relative_to(finetuned.folder)
        if src.is_dir() or rel.as_posix() in files or rel.as_posix() == LINEAGE_FILE:
            continue
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, out / rel)
    total = 0
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(desc=f"interpolate α={alpha:g}", unit="tensor", mininterval=1.0)
    try:
        for rel in files:
            (out / rel).parent.mkdir(parents=True, exist_ok=True)
            total += interpolate_file(start.folder / rel, finetuned.folder / rel, alpha, out / rel, progress=bar)
    finally:
        if bar is not None:
            bar.close()
    lineage = {
        "method": "weight-space interpolation with the start model (WiSE-FT)", "formula": FORMULA, "alpha": alpha,
        "paper": {"title": PAPER[0], "url": PAPER[1]},
        "start": {"name": start.name, "weights_sha256": {f: sha256_file(start.folder / f) for f in files}},
        "finetuned": {"name": finetuned.name,
                      "weights_sha256": {f: sha256_file(finetuned.folder / f) for f in files}},
        "weights_sha256": {f: sha256_file(out / f) for f in files}, "tensors": total, **dict(extra or {})}
    (out / LINEAGE_FILE).write_text(json.dumps(lineage, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    from models.export_files import publishable

    publishable(out)
    log.info("interpolated %d tensors at α = %g: %s ← %s, %s", total, alpha, out, start.name, finetuned.name)
    return lineage


def interpolate_folders(start: Parent, finetuned: Parent, alpha: float, out: Path, *, progress: bool = False,
                        extra: Mapping[str, Any] | None = None, overwrite: bool = False) -> dict[str, Any]:
    """``write_interpolated`` into a temporary folder beside ``out``, renamed into place when complete (an existing
    ``out`` is refused unless ``overwrite``, then replaced)."""
    out = Path(out).absolute()
    if out.exists() and not overwrite:
        raise FileExistsError(f"{out} exists; choose another folder or allow replacing it")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=out.parent))
    try:
        lineage = write_interpolated(start, finetuned, alpha, tmp, progress=progress, extra=extra)
        if out.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{out.name}.old-", dir=out.parent))
            os.replace(out, old / "x")
            shutil.rmtree(old, ignore_errors=True)
        os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return lineage


def read_lineage(folder: Path) -> dict[str, Any] | None:
    """The ``polysent_interpolation.json`` of a model folder, ``None`` without one."""
    path = Path(folder) / LINEAGE_FILE
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise InterpolationError(f"{path}: not JSON ({exc}); expected an interpolation lineage") from None
    if not isinstance(data, dict) or "alpha" not in data:
        raise InterpolationError(f"{path}: no alpha; expected an interpolation lineage")
    return data
