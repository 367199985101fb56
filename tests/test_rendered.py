"""The review's pages render as a reviewer reads them (``tests/rendered.py``): no mermaid error, no table
wider than GitHub's ~890 px column, no diagram whose text renders below 10 px at page width. In CI the
pages are built from explorations of every variant at its ``default`` bounds; the nightly run checks the
real review (``python -m tests.rendered review-nightly``)."""
from __future__ import annotations

import os

import pytest

from pulsar_verify import registry, report
from pulsar_verify.explorer import explore

from . import rendered


@pytest.fixture(scope="module")
def tools():
    try:
        rendered.chromium(), rendered.mermaid_js()
    except rendered.Unavailable as exc:
        if os.environ.get("CI"):
            pytest.fail(f"the rendered check cannot run in CI: {exc}")
        pytest.skip(str(exc))


@pytest.fixture(scope="module")
def pages(tmp_path_factory) -> dict[str, str]:
    rows = []
    for name in registry.names():
        cls = registry.model_class(name)
        for variant in cls.variant_names():
            model = cls(cls.make_config(variant))
            rows.append((name, variant, "default", "local", model, explore(model)[0]))
    table = report.cells(rows, {})
    classes = registry.all_models()
    out = {cls.name: report.model_page(cls, table, rows, []) for cls in classes}
    out["index"] = report.index_page(classes, table, rows, [])
    return out


def test_every_page_renders_within_the_column(tools, pages):
    measures = rendered.measure(pages)
    print(rendered.report(measures))
    assert sum(len(m["diagrams"]) for m in measures.values()) >= 27  # at least one per finding
    assert rendered.problems(measures) == []


def test_a_table_too_wide_and_a_broken_diagram_are_reported(tools):
    wide = "| " + " | ".join(f"`column-{i}-without-a-break`" for i in range(12)) + " |\n|" + "---|" * 12 + "\n"
    broken = "```mermaid\nsequenceDiagram\n    A->>: no receiver\n```\n"
    found = rendered.problems(rendered.measure({"bad": wide + "\n" + broken}))
    assert any("table 0" in p for p in found) and any("mermaid error" in p for p in found)
