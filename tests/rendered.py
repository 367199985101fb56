"""The review's pages as a reviewer sees them on GitHub: each Markdown page rendered into an ~890 px column
with GitHub's table rules, every mermaid block rendered by mermaid in headless Chromium (served from
localhost), and each diagram's natural width and each table's width measured there.

A diagram wider than the column is scaled down to fit it, so its text (mermaid's 16 px) shrinks by the
same factor; a table wider than the column scrolls sideways. ``python -m tests.rendered DIR`` checks the
pages of a review directory (the nightly run's) and prints every measure; exit 1 if a limit is broken.
"""
from __future__ import annotations

import functools
import http.server
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

COLUMN_PX = 890  # GitHub's Markdown column
FONT_PX = 16  # mermaid's text
MIN_TEXT_PX = 10
MERMAID = "mermaid@12"
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "pulsar-verify" / "render"

STYLE = f"""
body {{ margin: 0; }}
.markdown-body {{ box-sizing: border-box; width: {COLUMN_PX}px; font: 16px/1.5 -apple-system, "Segoe UI", "Noto Sans",
  Helvetica, Arial, sans-serif; }}
.markdown-body table {{ display: block; width: max-content; max-width: 100%; overflow: auto; border-spacing: 0;
  border-collapse: collapse; }}
.markdown-body td, .markdown-body th {{ padding: 6px 13px; border: 1px solid #d0d7de; }}
.markdown-body code {{ font-size: 85%; padding: .2em .4em; background: #eff1f3; border-radius: 6px; }}
.markdown-body pre.mermaid {{ margin: 0 0 16px; }}
.markdown-body pre.mermaid svg {{ max-width: 100%; height: auto; }}
#measures {{ display: none; }}
"""

MEASURE = """
mermaid.initialize({startOnLoad: false});
(async () => {
  const out = {diagrams: [], tables: []};
  document.querySelectorAll('details').forEach(d => d.open = true);
  const blocks = [...document.querySelectorAll('pre.mermaid')];
  for (const [i, block] of blocks.entries()) {
    try {
      const {svg} = await mermaid.render('diagram' + i, block.textContent);
      block.innerHTML = svg;
      const el = block.querySelector('svg');
      const natural = parseFloat(el.style.maxWidth) || el.viewBox.baseVal.width;
      out.diagrams.push({index: i, natural: natural, shown: el.getBoundingClientRect().width});
    } catch (e) {
      out.diagrams.push({index: i, error: String((e && e.message) || e).split('\\n')[0]});
    }
  }
  document.querySelectorAll('table').forEach((t, i) =>
    out.tables.push({index: i, width: t.scrollWidth, head: t.rows[0].innerText.replace(/\\s+/g, ' ').slice(0, 70)}));
  const pre = document.createElement('pre');
  pre.id = 'measures';
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
})();
"""


class Unavailable(Exception):
    """Chromium or mermaid cannot be had on this machine."""


def chromium() -> str:
    """Debian's Chromium, installed with apt-get when it is missing and this is root."""
    found = shutil.which("chromium")
    if found:
        return found
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        raise Unavailable("chromium is not installed (apt-get install chromium)")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for cmd in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", "chromium"]):
        if subprocess.run(cmd, capture_output=True, env=env, timeout=900).returncode:
            raise Unavailable(f"{' '.join(cmd)} failed")
    return shutil.which("chromium") or "/usr/bin/chromium"


def mermaid_js() -> Path:
    """mermaid's browser bundle, from the npm registry into a cache directory."""
    bundle = CACHE / "node_modules" / "mermaid" / "dist" / "mermaid.min.js"
    if not bundle.exists():
        if not shutil.which("npm"):
            raise Unavailable("npm is not installed")
        CACHE.mkdir(parents=True, exist_ok=True)
        proc = subprocess.run(["npm", "install", "--silent", "--no-audit", "--no-fund", "--prefix", str(CACHE), MERMAID],
                              capture_output=True, text=True, timeout=900)
        if proc.returncode or not bundle.exists():
            raise Unavailable(f"npm install {MERMAID} failed: {proc.stderr.strip()[:200]}")
    return bundle


def html_of(markdown: str) -> str:
    from markdown_it import MarkdownIt
    body = MarkdownIt("commonmark").enable("table").render(markdown)
    body = re.sub(r'<pre><code class="language-mermaid">(.*?)</code></pre>',
                  lambda m: f'<pre class="mermaid">{m.group(1)}</pre>', body, flags=re.S)
    return (f"<!doctype html><html><head><meta charset='utf-8'><style>{STYLE}</style>"
            f"<script src='mermaid.min.js'></script></head><body><article class='markdown-body'>{body}</article>"
            f"<script>{MEASURE}</script></body></html>")


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def _serve(root: Path):
    handler = functools.partial(_Quiet, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def _chromium_args(browser: str, profile: str) -> list[str]:
    return [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            f"--user-data-dir={profile}"]


def _site(root: Path, assets: Path | None) -> None:
    shutil.copy(mermaid_js(), root / "mermaid.min.js")
    for image in (assets.glob("*.png") if assets else ()):
        shutil.copy(image, root / image.name)


def measure(pages: dict[str, str], assets: Path | None = None) -> dict[str, dict]:
    """``{name: markdown}`` -> ``{name: {"diagrams": [...], "tables": [...]}}`` as rendered in Chromium."""
    browser = chromium()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        _site(root, assets)
        for name, text in pages.items():
            (root / f"{name}.html").write_text(html_of(text))
        server = _serve(root)
        try:
            out = {}
            for name in pages:
                proc = subprocess.run([*_chromium_args(browser, str(root / "profile")), "--virtual-time-budget=120000",
                                       "--dump-dom", f"http://127.0.0.1:{server.server_port}/{name}.html"],
                                      capture_output=True, text=True, timeout=300)
                m = re.search(r'<pre id="measures">(.*?)</pre>', proc.stdout, re.S)
                if not m:
                    raise RuntimeError(f"{name}: Chromium returned no measures ({proc.stderr.strip()[-300:]})")
                out[name] = json.loads(m.group(1).replace("&quot;", '"').replace("&lt;", "<").replace("&gt;", ">")
                                       .replace("&amp;", "&"))
            return out
        finally:
            server.shutdown()


def screenshot(markdown: str, png: Path, assets: Path | None = None, width: int = 1280, height: int = 900) -> Path:
    """The page's first screen at ``width`` px, as a reviewer opening it sees it."""
    browser = chromium()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        _site(root, assets)
        html = html_of(markdown).replace("<article class='markdown-body'>",
                                         f"<article class='markdown-body' style='margin: 24px {(width - COLUMN_PX) // 2}px'>")
        (root / "page.html").write_text(html)
        server = _serve(root)
        try:
            subprocess.run([*_chromium_args(browser, str(root / "profile")), "--virtual-time-budget=60000",
                            f"--window-size={width},{height}", f"--screenshot={png}",
                            f"http://127.0.0.1:{server.server_port}/page.html"], capture_output=True, timeout=300)
        finally:
            server.shutdown()
    return png


def problems(measures: dict[str, dict]) -> list[str]:
    """Every limit a page breaks: a mermaid error, a table wider than the column, diagram text below 10 px."""
    out = []
    for name, m in measures.items():
        for d in m["diagrams"]:
            if "error" in d:
                out.append(f"{name}: diagram {d['index']}: mermaid error: {d['error']}")
            elif FONT_PX * min(1.0, COLUMN_PX / d["natural"]) < MIN_TEXT_PX:
                out.append(f"{name}: diagram {d['index']} is {d['natural']:.0f} px wide: its text renders at "
                           f"{FONT_PX * COLUMN_PX / d['natural']:.1f} px")
        for t in m["tables"]:
            if t["width"] > COLUMN_PX + 1:
                out.append(f"{name}: table {t['index']} ({t['head']}) is {t['width']} px wide")
    return out


def report(measures: dict[str, dict]) -> str:
    """Each page: every diagram's natural width (and the size its text renders at in the column) and
    every table's width at 890 px."""
    lines = []
    for name, m in measures.items():
        diagrams = ", ".join(f"{d['natural']:.0f} ({FONT_PX * min(1.0, COLUMN_PX / d['natural']):.1f} px text)"
                             if "natural" in d else "error" for d in m["diagrams"]) or "none"
        tables = ", ".join(str(t["width"]) for t in m["tables"]) or "none"
        lines.append(f"{name}: diagrams {diagrams}; tables {tables} px")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    folder = Path(argv[0] if argv else "review")
    pages = {p.stem: p.read_text() for p in sorted(folder.glob("*.md"))}
    measures = measure(pages, folder)
    print(report(measures))
    bad = problems(measures)
    for line in bad:
        print(line)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
