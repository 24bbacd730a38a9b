"""Dev evaluation during training, for best-checkpoint selection (methods §2.3, §4.3, §6.2).

``tatoeba``: the mean over ``languages`` of Tatoeba accuracy averaged over both directions (xx→en, en→xx), on at most
``max_pairs`` pairs per language of ``eval_tatoeba`` (MPCL selects on Tatoeba/BUCC; IMASCL on a Tatoeba split).
``stsb``: Spearman ×100 of cosine on ``eval_sts`` rows of dataset ``stsb``, subset ``split`` (SimCSE, mSimCSE and EASE
select on English STS-B dev). Embeddings come from ``SentenceEncoder.encode`` (eval mode: no dropout, no train-only
head), so the score is that of the model as it will be exported.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from models.encoder import SentenceEncoder
from models.evaluation.bitext import tatoeba_accuracy
from models.evaluation.sts import sts_correlations
from models.settings import DevSettings
from models.training.corpus_tables import CorpusError, read_table

log = logging.getLogger("polysent.models.dev_eval")


class DevEvaluator:
    def __init__(self, settings: DevSettings, tables: Mapping[str, Path]) -> None:
        self.settings = settings
        if settings.metric == "tatoeba":
            self.name = "tatoeba_accuracy"
            if "eval_tatoeba" not in tables:
                raise CorpusError("dev: metric tatoeba needs the eval_tatoeba table (configure sources.eval.tatoeba)")
            t = read_table("eval_tatoeba", tables["eval_tatoeba"], ["lang", "idx", "text", "eng"])
            t = t.sort_by([("lang", "ascending"), ("idx", "ascending")])
            langs = t.column("lang").cast(pa.string()).to_pylist()
            have = sorted(set(langs))
            wanted = list(settings.languages) or have
            unknown = [x for x in wanted if x not in have]
            if unknown:
                raise CorpusError(f"dev: languages {unknown} are not in eval_tatoeba ({tables['eval_tatoeba']}); it "
                                  f"has {have}")
            text, eng = t.column("text").to_pylist(), t.column("eng").to_pylist()
            self.sets: dict[str, tuple[list[str], list[str]]] = {}
            for lang in wanted:
                rows = [i for i, x in enumerate(langs) if x == lang][: settings.max_pairs]
                self.sets[lang] = ([text[i] for i in rows], [eng[i] for i in rows])
        else:
            self.name = "stsb_spearman"
            if "eval_sts" not in tables:
                raise CorpusError("dev: metric stsb needs the eval_sts table with the STS benchmark")
            t = read_table("eval_sts", tables["eval_sts"], ["dataset", "subset", "s1", "s2", "score"],
                           filter=(pc.field("dataset") == "stsb") & (pc.field("subset") == settings.split))
            self.s1, self.s2 = t.column("s1").to_pylist(), t.column("s2").to_pylist()
            self.gold = np.asarray(t.column("score").to_pylist(), dtype=np.float64)
        log.info("dev metric %s every %d steps", self.name, settings.every)

    def __call__(self, model: SentenceEncoder) -> float:
        if self.settings.metric == "tatoeba":
            scores = []
            for src, eng in self.sets.values():
                scores.append(tatoeba_accuracy(model.encode(src), model.encode(eng))["accuracy_mean"])
            return float(np.mean(scores))
        return float(sts_correlations(model.encode(self.s1), model.encode(self.s2), self.gold)["spearman"])
