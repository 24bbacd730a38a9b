"""The README and the pages under docs/ hold together: every relative link names a file of the repository and, with a
``#fragment``, a heading or anchor of that file; every YAML block of a docs page is configuration the loader knows
(each key path documented by the generated reference), so a renamed key cannot survive in an example."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from conftest import REPO

from flows.config import PipelineConfig
from flows.config_reference import Reference, documented_paths, undocumented

PAGES = sorted([REPO / "README.md", REPO / "experiments" / "README.md", *(REPO / "docs").glob("*.md")])
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(text: str) -> set[str]:
    prose = FENCE.sub("", text)
    found = {_slug(m) for m in re.findall(r"^#+ (.+)$", prose, re.M)}
    return found | set(re.findall(r'<a id="([^"]+)"></a>', text))


def test_the_docs_pages_exist_and_the_readme_links_each() -> None:
    names = {p.name for p in (REPO / "docs").glob("*.md")}
    assert {"configuration.md", "evaluation.md", "node-contract.md", "pipeline.md", "training.md", "operations.md",
            "mining.md", "models.md", "warehouse.md", "wikipedia.md", "paper-configs.md"} <= names
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert not [n for n in names if f"(docs/{n}" not in readme], "a docs page the README does not link"


def test_the_readme_is_a_guide_of_a_few_hundred_lines_with_contents() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) < 400
    contents = readme[readme.index("## Contents"):readme.index("\n## ", readme.index("## Contents") + 1)]
    headings = {_slug(h) for h in re.findall(r"^## (.+)$", FENCE.sub("", readme), re.M)} - {"contents"}
    linked = set(re.findall(r"\(#([\w-]+)\)", contents))
    assert headings <= linked, f"sections missing from the contents: {headings - linked}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_resolves(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    broken = []
    for target in LINK.findall(FENCE.sub("", text)):
        if re.match(r"[a-z]+:", target):  # http:, https:, mailto:
            continue
        path, _, fragment = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append(f"{target}: no such file")
        elif fragment and file.suffix == ".md" and fragment not in _anchors(file.read_text(encoding="utf-8")):
            broken.append(f"{target}: no heading or anchor #{fragment}")
    assert not broken, broken


def test_every_yaml_block_of_the_docs_uses_documented_keys() -> None:
    ref = Reference()
    ref.visit(PipelineConfig, "")
    documented = documented_paths(ref)
    blocks = [(page, body) for page in PAGES if page.parent.name == "docs"
              for lang, body in FENCE.findall(page.read_text(encoding="utf-8")) if lang == "yaml"]
    assert len(blocks) >= 5
    problems = []
    for page, body in blocks:
        raw = yaml.safe_load(body)
        assert isinstance(raw, dict), f"{page.name}: a YAML block that is not a config mapping"
        problems += [f"{page.name}: {p}" for p in undocumented(raw, documented)]
    assert not problems, problems


def test_the_readme_states_the_exit_codes_of_flows_exit_codes() -> None:
    from flows.exit_codes import TABLE

    codes: dict[str, str] = {}
    for line in TABLE.splitlines()[1:]:
        code, _, text = line.strip().partition("  ")
        if code.isdigit():
            codes[code] = text.strip()
        else:  # a continuation line of the code before
            codes[list(codes)[-1]] += " " + line.strip()
    readme = " ".join((REPO / "README.md").read_text(encoding="utf-8").split())
    assert list(codes) == ["0", "1", "2"]
    for code, text in codes.items():
        assert f"**{code}** {text}" in readme, code
