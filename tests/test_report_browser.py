"""``report.html`` in a real browser: headless Chromium opens it offline and every figure is a visible image.

The report's page has no script of its own, so the test opens a copy with a small probe appended before ``</body>``:
after the load event it measures every ``<figure>``'s inline SVG on the page, re-decodes the same SVG as a standalone
image (``data:`` URI, as a broken or truncated SVG would fail to decode), paints it on a canvas and counts the inked
pixels, lists every ``<img>`` with its ``naturalWidth``, and lists the resources the page fetched (Resource Timing).
The result is written into the DOM, which ``chromium --headless --dump-dom`` prints. Host resolution is mapped to
nothing, so a page that needed the network would show it. Skipped, with the reason, when Chromium is absent (Debian:
``apt-get install chromium``).
"""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from test_report import _trained_inputs

from pipelines.report import ReportSettings, build_report, plots

CHROMIUM = next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)
pytestmark = [
    pytest.mark.skipif(CHROMIUM is None, reason="headless Chromium is not installed (Debian package `chromium`: "
                                                "apt-get install -y chromium); report.html is not opened in a browser"),
    pytest.mark.skipif(not plots.available(), reason="matplotlib is not installed: the report has no figures"),
]

PROBE = """<script>
window.addEventListener("load", async () => {
  const out = {figures: [], images: [], resources: []};
  for (const fig of document.querySelectorAll("figure")) {
    const svg = fig.querySelector("svg");
    const box = svg ? svg.getBoundingClientRect() : {width: 0, height: 0};
    const rec = {id: fig.id, width: box.width, height: box.height,
                 marks: svg ? svg.querySelectorAll("path, rect, line, polyline, text, use").length : 0};
    if (svg) {
      const img = new Image();
      img.src = "data:image/svg+xml;charset=utf-8," + encodeURIComponent(new XMLSerializer().serializeToString(svg));
      try {
        await img.decode();
        rec.naturalWidth = img.naturalWidth;
        rec.naturalHeight = img.naturalHeight;
        const canvas = document.createElement("canvas");
        canvas.width = img.naturalWidth;
        canvas.height = img.naturalHeight;
        const ctx = canvas.getContext("2d");
        ctx.fillStyle = "#ffffff";
        ctx.fillRect(0, 0, canvas.width, canvas.height);
        ctx.drawImage(img, 0, 0);
        const px = ctx.getImageData(0, 0, canvas.width, canvas.height).data;
        let ink = 0;
        for (let i = 0; i < px.length; i += 4) if (px[i] < 200 || px[i + 1] < 200 || px[i + 2] < 200) ink++;
        rec.ink = ink;
      } catch (e) { rec.error = String(e); }
    }
    out.figures.push(rec);
  }
  for (const img of document.images) out.images.push({src: img.src.slice(0, 80), naturalWidth: img.naturalWidth});
  out.resources = performance.getEntriesByType("resource").map(e => e.name);
  const pre = document.createElement("pre");
  pre.id = "probe";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
</script>
"""


def _chromium(*args: str, profile: Path) -> subprocess.CompletedProcess[str]:
    assert CHROMIUM is not None
    return subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                           "--disable-extensions", "--disable-background-networking", "--disable-sync",
                           "--host-resolver-rules=MAP * ~NOTFOUND", f"--user-data-dir={profile}", *args],
                          capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("browser")
    corpora, evals, runs = _trained_inputs(tmp)
    build_report(ReportSettings(), corpora, evals, "browser", tmp / "out", runs, ["peer"])
    return tmp / "out"


def test_report_html_renders_every_plot_as_a_visible_image_offline(report: Path, tmp_path: Path) -> None:
    page = (report / "report.html").read_text("utf-8")
    n_figures = page.count("<figure")
    assert n_figures == len(list((report / "plots").glob("*.svg"))) >= 5  # curves, per-language charts, …
    probe = tmp_path / "probe.html"  # not in the report folder: the copy must not lean on plots/*.svg
    probe.write_text(page.replace("</body>", PROBE + "</body>"), encoding="utf-8")
    proc = _chromium("--virtual-time-budget=15000", "--dump-dom", probe.as_uri(), profile=tmp_path / "profile")
    found = re.search(r'<pre id="probe">(.*?)</pre>', proc.stdout, re.S)
    assert found, f"the probe wrote nothing (chromium exit {proc.returncode}): {proc.stderr[-2000:]}"
    result = json.loads(html.unescape(found.group(1)))
    assert len(result["figures"]) == n_figures
    for fig in result["figures"]:
        assert "error" not in fig, fig
        assert fig["width"] > 100 and fig["height"] > 100, fig  # laid out with a visible size on the page
        assert fig["naturalWidth"] > 0 and fig["naturalHeight"] > 0, fig  # decodes as an image
        assert fig["marks"] > 20 and fig["ink"] > 0.01 * fig["naturalWidth"] * fig["naturalHeight"], fig
    assert all(img["naturalWidth"] > 0 for img in result["images"]), result["images"]  # no broken <img>
    assert result["resources"] == []  # nothing fetched: no CDN, no font, no external file
    assert {f["id"] for f in result["figures"]} >= {"fig-training_ft", "fig-tatoeba_canonical_accuracy_mean_per_subset",
                                                    "fig-xsim_laser_error_rate_per_subset"}


def test_report_html_screenshot_is_not_blank(report: Path, tmp_path: Path) -> None:
    """The page itself (no probe) as a browser paints it: a screenshot of the top with figures in it has ink."""
    from PIL import Image

    shot = tmp_path / "shot.png"
    proc = _chromium("--hide-scrollbars", "--window-size=1280,2400", f"--screenshot={shot}",
                     (report / "report.html").as_uri(), profile=tmp_path / "profile")
    assert shot.exists(), proc.stderr[-2000:]
    with Image.open(shot) as im:
        gray = im.convert("L")
        assert gray.size == (1280, 2400)
        histogram = gray.histogram()
    dark = sum(histogram[:200])
    coloured = dark / (1280 * 2400)
    assert coloured > 0.02, f"only {coloured:.2%} of the screenshot is not white"
