"""The design-review report: an index, one Markdown page per PIP (properties by variant with the
method behind each verdict, each finding with its scenario, a mermaid sequence diagram and the
replay commands), PNG plots, and the expectations that gate the run's exit code."""
from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

import attrs

from .findings import catalogue
from .model import Model
from .replay import load, model_for, replay
from .show import diff

HOLDS, VIOLATED = "holds", "violated"


@attrs.define
class Cell:
    """What is known of one (variant, property): exhaustive runs, Hypothesis, violations."""

    bounds: int = 0
    states: int = 0
    violations: list = attrs.Factory(list)  # (bounds, length, lasso)
    hypothesis: str | None = None  # "holds (N examples)" / "violated"
    incomplete: bool = False

    def markdown(self) -> str:
        if self.violations:
            preset, length, lasso = min(self.violations, key=lambda v: v[1])
            more = f" (+{len(self.violations) - 1} bounds)" if len(self.violations) > 1 else ""
            return f"❌ `{preset}`: {length}-step {'lasso' if lasso else 'trace'}{more}"
        text = f"✅ exhaustive, {self.bounds} bounds, {self.states:,} states"
        if self.incomplete:
            text += " (a bound cut the search)"
        if self.hypothesis:
            text += f"; Hypothesis {self.hypothesis}"
        return text


def cells(rows, hypothesis: dict) -> dict:
    """(model, variant, property) -> Cell over the local runs; ``hypothesis`` maps (model, variant)
    to (examples, violated property ids)."""
    out: dict = defaultdict(Cell)
    for name, variant, preset, engine, model, r in rows:
        if engine != "local":
            continue
        for pid, _ in r.properties:
            c = out[name, variant, pid]
            c.bounds += 1
            c.states += r.distinct_states
            c.incomplete |= not r.complete
        for v in r.violations:
            out[name, variant, v.prop.id].violations.append((preset, v.length, v.loop is not None))
    for (name, variant), (examples, failed) in hypothesis.items():
        for (n, var, pid), c in out.items():
            if (n, var) == (name, variant):
                c.hypothesis = VIOLATED if pid in failed else f"holds ({examples} examples)"
    return out


# -- expectations --------------------------------------------------------------

def verdicts(table: dict) -> dict:
    out: dict = {}
    for (name, variant, pid), c in sorted(table.items()):
        out.setdefault(name, {}).setdefault(variant, {})[pid] = VIOLATED if c.violations else HOLDS
    return out


def compare(expected: dict, got: dict) -> list[str]:
    """Differences for the models in ``got``: a new violation, a finding no longer found, a
    (model, variant, property) that appeared or disappeared."""
    lines = []
    for name, variants in got.items():
        want = expected.get(name, {})
        for variant in sorted(set(variants) | set(want)):
            a, b = want.get(variant, {}), variants.get(variant, {})
            for pid in sorted(set(a) | set(b)):
                if a.get(pid) != b.get(pid):
                    lines.append(f"{name} {variant} {pid}: expected {a.get(pid, 'absent')}, got {b.get(pid, 'absent')}")
    return lines


# -- sequence diagrams ---------------------------------------------------------

def _actor(template: str, params: dict) -> str:
    return re.sub(r"\{(\w+)\}", lambda m: str(params.get(m.group(1), "")), template).strip()


def _ident(name: str) -> str:
    return re.sub(r"\W", "_", name)


def _text(s: str) -> str:
    """Message text mermaid accepts: no statement separators, entity codes or quotes."""
    return s.replace(";", ",").replace("#", "no. ").replace("'", "").replace('"', "")


def _short(value: str, limit: int = 60) -> str:
    return value if len(value) <= limit else value[:limit - 1] + "…"


def sequence_diagram(model: Model, states, actions, prop_id: str, loop: int | None = None) -> str:
    """The counterexample as a mermaid ``sequenceDiagram``: one message per step with the state it
    changes; the step that breaks the property (or the loop of a lasso) highlighted."""
    steps, seen = [], []
    for i, a in enumerate(actions, start=1):
        params = dict(a.params)
        arrow = model.sequence.get(a.name, "System->>System")
        src, dst = (_actor(x, params) for x in arrow.split("->>"))
        for actor in (src, dst):
            if actor not in seen:
                seen.append(actor)
        changes = [f"{path}: {_short(was)} → {_short(now)}" for path, was, now in diff(states[i - 1], states[i])]
        if len(changes) > 3:
            changes = changes[:3] + [f"… {len(changes) - 3} more"]
        text = "<br/>".join([f"{i}. {a}"] + changes)
        steps.append((src, dst, _text(text)))
    lines = ["sequenceDiagram"]
    lines += [f"    participant {_ident(a)} as {a}" for a in seen]
    last = len(steps)
    for i, (src, dst, text) in enumerate(steps, start=1):
        if loop is not None and i == loop + 1:
            lines.append("    rect rgb(255, 236, 204)")
            lines.append(f"    Note over {_ident(seen[0])},{_ident(seen[-1])}: from here the run loops forever")
        if loop is None and i == last:
            lines.append("    rect rgb(255, 221, 221)")
        lines.append(f"    {_ident(src)}->>{_ident(dst)}: {text}")
        if loop is None and i == last:
            lines.append(f"    Note over {_ident(dst)}: {prop_id} violated")
            lines.append("    end")
    if loop is not None:
        if loop >= last:
            lines.append(f"    Note over {_ident(seen[0])},{_ident(seen[-1])}: stays here forever: {prop_id} never holds")
        else:
            lines.append(f"    Note over {_ident(seen[0])},{_ident(seen[-1])}: back to the state after step {loop}: "
                         f"{prop_id} never holds")
            lines.append("    end")
    return "\n".join(lines)


def _scenario(md: str) -> str:
    """The explanation's "Scenario" section."""
    m = re.search(r"^## Scenario\n(.*?)(?=^## |\Z)", md, re.S | re.M)
    return m.group(1).strip() if m else ""


def finding_section(cls: type[Model], f, table: dict | None = None) -> list[str]:
    outcome = replay(f.trace)
    doc = load(f.trace)
    model = model_for(doc, f.trace)
    fix_cell = table.get((cls.name, f.fix, f.property)) if table else None
    fix = f"`{f.fix}`" + (f": {fix_cell.markdown()}" if fix_cell else "")
    rel = f"findings/{cls.name}/{f.trace.name}"
    return [f"### {f.title}", "",
            f"**Property:** `{f.property}` — {model.property(f.property).statement}. **Bounds:** `{f.bounds}`. "
            f"**Counterexample:** {f.length} steps{' (the property checked on its own)' if f.alone else ''}. "
            f"**Fix:** {fix}.", "",
            _scenario(f.explanation.read_text()), "",
            "```mermaid", sequence_diagram(model, outcome.states, outcome.actions, f.property, doc.get("loop")), "```",
            "", f"Explanation: [`findings/{cls.name}/{f.explanation.name}`](../findings/{cls.name}/{f.explanation.name})",
            "", "```", f"pulsar-verify replay {rel}                       # exit 1: reproduces",
            f"pulsar-verify replay {rel} --variant {f.fix}  # exit 0: the fix kills it", "```", ""]


# -- pages -----------------------------------------------------------------------

def proofs_section(proofs: list) -> list[str]:
    """The Z3 obligations of a model: ``proofs`` is a list of (Obligation, Verdict)."""
    if not proofs:
        return []
    lines = ["## Z3 obligations (`pulsar-verify prove`)", "",
             "| obligation | variants | verdict | seconds | claim | counterexample |", "|---|---|---|---:|---|---|"]
    for o, v in proofs:
        row = [f"`{o.name}`", ", ".join(f"`{x}`" for x in o.variants), v.status, f"{v.seconds:.2f}", o.statement,
               v.detail if v.status != "proved" else ""]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in row) + " |")
    return lines + [""]


def model_page(cls: type[Model], table: dict, rows, plots: list[str], proofs: list | None = None) -> str:
    fixes = [v for v in cls.variants if v.kind != "mutant"]
    mutants = [v for v in cls.variants if v.kind == "mutant"]
    lines = [f"# {cls.title}", "", f"Model `{cls.name}`, from `{cls.source}`. Bounds explored in-process: "
             + ", ".join(f"`{p}`" for p in cls.in_process_presets()) + ".", "",
             "## Properties by variant", "",
             "| property | statement | PIP section | " + " | ".join(f"`{v.name}`" for v in fixes) + " |",
             "|---|---|---|" + "---|" * len(fixes)]
    for p in cls.checked_properties():
        row = [f"`{p.id}`", p.statement, p.section]
        row += [table[cls.name, v.name, p.id].markdown() if (cls.name, v.name, p.id) in table else "—"
                for v in fixes]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in row) + " |")
    lines += ["", "Variants: " + "; ".join(f"`{v.name}`: {v.description}" for v in fixes), ""]
    if mutants:
        lines += ["## Deliberately broken variants (each must make its property fail)", "",
                  "| mutant | what it breaks | properties violated |", "|---|---|---|"]
        for v in mutants:
            bad = sorted(pid for (n, var, pid), c in table.items() if n == cls.name and var == v.name and c.violations)
            lines.append(f"| `{v.name}` | {v.description} | {', '.join(f'`{b}`' for b in bad) or '—'} |")
        lines.append("")
    found = catalogue(cls.name)
    if found:
        lines += ["## Findings", ""]
        for f in found:
            lines += finding_section(cls, f, table)
    lines += proofs_section(proofs or [])
    if plots:
        lines += ["## State space and coverage", ""] + [f"![{p}]({p})" for p in plots] + [""]
    lines += ["## Runs", "", "| variant | bounds | engine | states | transitions | depth | seconds | liveness | violated |",
              "|---|---|---|---:|---:|---:|---:|---|---|"]
    for name, variant, preset, engine, _, r in rows:
        if name == cls.name:
            lines.append(f"| {variant} | {preset} | {engine} | {r.distinct_states:,} | {r.transitions:,} | {r.depth} | "
                         f"{r.seconds:.2f} | {'checked' if r.liveness_checked else 'not checked'} | "
                         f"{', '.join(v.prop.id for v in r.violations) or '-'} |")
    return "\n".join(lines) + "\n"


def index_page(classes, table: dict, rows, mismatches: list[str] | None) -> str:
    head = ["| PIP | model | variants | properties | findings | as written | all fixes | states explored |",
            "|---|---|---:|---:|---:|---|---|---:|"]
    body = []
    for cls in classes:
        names = [v.name for v in cls.variants]
        best = cls.best_variant()

        def summary(variant):
            cs = [c for (n, var, _), c in table.items() if n == cls.name and var == variant]
            if not cs:
                return "—"
            bad = sum(1 for c in cs if c.violations)
            return f"{len(cs) - bad}/{len(cs)} hold" if bad else f"all {len(cs)} hold"
        states = sum(r.distinct_states for n, _, _, e, _, r in rows if n == cls.name)
        body.append(f"| {cls.title.split(':')[0]} | [`{cls.name}`]({cls.name}.md) | {len(names)} | "
                    f"{len(cls.checked_properties())} | {len(catalogue(cls.name))} | {summary('as-written')} | "
                    f"{summary(best) if best else '—'} | {states:,} |")
    lines = ["# pulsar-verify design review", "",
             "Each PIP's page gives every property by variant with the method behind the verdict, and each "
             "finding with its scenario, a sequence diagram and the commands that replay it.", ""] + head + body
    if mismatches is not None:
        lines += ["", "## Expectations", ""]
        lines += ["Every verdict is the one `expectations.json` records."] if not mismatches else (
            ["Verdicts that differ from `expectations.json`:", ""] + [f"- {m}" for m in mismatches])
    return "\n".join(lines) + "\n"


def plots(out: Path, name: str, rows) -> list[str]:
    """PNG plots of distinct states per BFS level (as written, each bound set) and of action
    coverage (as written, all bound sets together)."""
    import matplotlib
    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    mine = [(preset, r) for n, variant, preset, engine, _, r in rows
            if n == name and variant == "as-written" and engine == "local"]
    if not mine:
        return []
    def save(fig, kind: str) -> str:
        fig.tight_layout()
        fig.savefig(out / f"{name}-{kind}.png", dpi=90)
        plt.close(fig)
        return f"{name}-{kind}.png"

    fig, ax = plt.subplots(figsize=(8, 4))
    for preset, r in mine:
        ax.plot(range(len(r.level_sizes)), r.level_sizes, marker=".", label=preset)
    ax.set(xlabel="BFS level (depth)", ylabel="new distinct states", title=f"{name} as written: states per level")
    ax.legend(fontsize="small", ncol=2)
    files = [save(fig, "levels")]
    coverage: dict = defaultdict(int)
    for _, r in mine:
        for label, n in r.coverage.items():
            coverage[label] += n
    labels = sorted(coverage)
    fig, ax = plt.subplots(figsize=(8, max(3, 0.22 * len(labels))))
    ax.barh(labels, [coverage[x] for x in labels])
    ax.set(xscale="log", xlabel="transitions (log)", title=f"{name} as written: action coverage")
    ax.tick_params(axis="y", labelsize=7)
    return files + [save(fig, "coverage")]


def sealed_comparison(rows) -> list[str]:
    """v4 (in-stream markers) against PIP-473 on the scenario PIP-473 exists for: a segment
    sealed mid-transaction (bounds ``sealed`` of both models, in-process)."""
    cells = {}
    for name, variant, preset, engine, _, r in rows:
        if name in ("v4-txn", "pip-473") and variant == "as-written" and preset == "sealed" and engine == "local":
            stall = next((v for v in r.violations if v.prop.id == "end-txn-completes"), None)
            cells[name] = (f"violated: {stall.length}-step lasso" if stall else
                           "holds" if r.liveness_checked else "not checked")
    if len(cells) < 2:
        return []
    return ["", "## A segment sealed mid-transaction: v4 against PIP-473", "",
            "| model | end-txn-completes (bounds `sealed`) |", "|---|---|",
            f"| v4-txn (in-stream markers) | {cells['v4-txn']} |", f"| pip-473 (metadata-driven) | {cells['pip-473']} |"]
