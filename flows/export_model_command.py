"""``polysent export-model RUN DIR``: a trained run's model folder with its model card and results
(``pipelines.export.model_export``).

The objective registry (``models.objective_registry``) says which corpus tables and languages each objective of the
run read and which paper it follows (as the objective's module registers it); those are the pieces of the card only
``models`` knows, so they are passed in from here.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any


def describe_objectives(objectives: Sequence[Mapping[str, Any]]) -> list[Any]:
    """The run's objectives (as its train manifest records them) → ``card_facts.ObjectiveInfo``."""
    from models.objective_registry import objective_citation, objective_languages, objective_tables
    from models.settings import TrainSettings
    from models.settings_io import from_mapping
    from pipelines.export.card_facts import ObjectiveInfo

    parsed = from_mapping(TrainSettings, {"objectives": list(objectives)}, "train manifest").objectives
    infos = []
    for o, raw in zip(parsed, objectives, strict=True):
        citation = objective_citation(o)
        infos.append(ObjectiveInfo(kind=o.kind, settings=dict(raw), tables=list(objective_tables(o)),
                                   languages=list(objective_languages(o)), citation=citation.text if citation else "",
                                   citation_url=citation.url if citation else ""))
    return infos


def interpolate(start: Path, trained: Path, alpha: float, out: Path, start_name: str,
                trained_name: str) -> dict[str, Any]:
    """``--interpolate-start``: (1 − α)·start + α·trained into ``out`` (``models.training.interpolation``), its
    lineage."""
    from models.training.interpolation import Parent, write_interpolated

    return write_interpolated(Parent(start_name, start), Parent(trained_name, trained), alpha, out, progress=True,
                              extra={"where": "export"})


def data_root(args: argparse.Namespace) -> Any:
    """--data-root, else the --config's ``data_root``, else $POLYSENT_DATA_ROOT, else ./data (a ``DataRoot``); None
    after printing why (an invalid config, or no warehouse there)."""
    from warehouse.layout import DataRoot

    path = args.data_root or Path(os.environ.get("POLYSENT_DATA_ROOT", "data"))
    if args.config is not None and args.data_root is None:
        from flows.config import ConfigError, load_config

        try:
            path = load_config(args.config).data_root
        except ConfigError as exc:
            print(f"polysent export-model: {exc}", file=sys.stderr)
            return None
    root = DataRoot.at(path)
    if not root.root.exists():
        print(f"polysent export-model: no warehouse at {root.root} (run `polysent run CONFIG` first)",
              file=sys.stderr)
        return None
    return root


def cmd_export_model(args: argparse.Namespace) -> int:
    """Exit 2 for an unknown run, a non-empty DIR without --force or a bad model name; 1 when writing failed
    (nothing is published then)."""
    from models.export_files import write_portable
    from models.training.interpolation import InterpolationError
    from pipelines.export.model_card import CardError
    from pipelines.export.model_export import export_model

    root = data_root(args)
    if root is None:
        return 2
    try:
        done = export_model(root, args.run, args.out, describe_objectives=describe_objectives, force=args.force,
                            model_name=args.model_name, interpolate_start=args.interpolate_start,
                            interpolate=interpolate, portable=write_portable)
    except (CardError, InterpolationError, FileExistsError, FileNotFoundError, ValueError) as exc:
        print(f"polysent export-model: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"polysent export-model: {args.out}: {exc}", file=sys.stderr)
        return 1
    f = done.facts
    print(f"{args.run} (train artifact {f.train_key[:20]}) → {done.folder}")
    print(f"  README.md: model card — {len(f.languages)} language(s), {len(f.corpora)} corpus artifact(s), "
          f"{len(f.results)} headline result(s) beside {f.start_run or 'no start model'}"
          f"{' and ' + ', '.join(f.peers) if f.peers else ''}; license {f.license}")
    print(f"  mteb/: {len(done.mteb_files)} file(s); model-index: {len(f.model_index)} result(s)")
    if f.interpolation:
        print(f"  weights: (1 − α)·start + α·trained at α = {f.interpolation['alpha']:g} "
              f"({'evaluated by the pipeline' if f.interpolation.get('evaluated') else 'not evaluated'})")
    return 0


def add_parser(sub: Any) -> None:
    ex = sub.add_parser("export-model", help="a trained run's model folder with its model card (README.md), "
                                             "evaluation results and mteb result files")
    ex.add_argument("run", help="the training run (a name under `training:`)")
    ex.add_argument("out", type=Path, help="folder to write (must be absent or empty unless --force)")
    ex.add_argument("--model-name", default=None, help="the model's name, organisation/model (default: polysent/RUN)")
    ex.add_argument("--force", action="store_true", help="replace an existing folder")
    ex.add_argument("--interpolate-start", type=_alpha, default=None, metavar="ALPHA",
                    help="export (1 − ALPHA)·start + ALPHA·trained (WiSE-FT; 0 ≤ ALPHA ≤ 1) instead of the trained "
                         "weights; the card names both parents and says the new weights were not evaluated")
    ex.add_argument("--data-root", type=Path, default=None, help="default: $POLYSENT_DATA_ROOT or ./data")
    ex.add_argument("--config", type=Path, default=None, help="take the data root from this config")
    ex.set_defaults(fn=cmd_export_model)


def _alpha(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number; expected α in [0, 1]") from None
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"{text}: expected α in [0, 1] (0: the start, 1: the trained model)")
    return value
