"""The design-review report: an index, one Markdown page per PIP (properties by variant with the
method behind each verdict, each finding with its scenario, a mermaid sequence diagram and the
replay commands), PNG plots, and the expectations that gate the run's exit code."""
from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

import attrs

from . import registry
from .findings import SEVERITIES, catalogue
from .model import Model
from .replay import load, model_for, replay
from .show import diff

HOLDS, VIOLATED = "holds", "violated"
OPEN = "not searched whole"  # a mutant's property its stopped runs did not decide (``review._mutant_runs``)


@attrs.define
class Cell:
    """What is known of one (variant, property): exhaustive runs, Hypothesis, violations."""

    bounds: int = 0
    states: int = 0
    violations: list = attrs.Factory(list)  # (bounds, length, shape: trace, lasso or never)
    hypothesis: str | None = None  # "holds (N examples)" / "violated"
    incomplete: bool = False
    proved: str = ""  # the Z3 obligation that proves the property for any size, if one does
    open: bool = False  # not violated, and the variant's runs stopped once they broke what they were to

    def markdown(self) -> str:
        if self.violations:
            preset, length, shape = min(self.violations, key=lambda v: v[1])
            more = f" (+{len(self.violations) - 1} bounds)" if len(self.violations) > 1 else ""
            if shape == "never":
                return f"❌ `{preset}`: no example in the whole search{more}"
            return f"❌ `{preset}`: {length}-step {shape}{more}"
        if self.open:
            return f"❔ not violated in {self.bounds} bounds, {self.states:,} states: not searched whole"
        text = f"✅ exhaustive, {self.bounds} bounds, {self.states:,} states"
        if self.incomplete:
            text += " (a bound cut the search)"
        if self.hypothesis:
            text += f"; Hypothesis {self.hypothesis}"
        if self.proved:
            text += f"; proved for any size (Z3 `{self.proved}`)"
        return text


    def compact(self) -> str:
        """For the matrix: ``✅ 56k`` (states explored, ``*`` if a bound cut the search, ``H`` if Hypothesis
        holds too, ``∀`` if Z3 proved it for any size) or ``❌ bounds·length`` (``↻`` for a lasso) of the
        shortest counterexample (``∅`` for a ``sometimes`` property no state was an example of)."""
        if self.violations:
            preset, length, shape = min(self.violations, key=lambda v: v[1])
            return f"❌ {preset}·{'∅' if shape == 'never' else length}{'↻' if shape == 'lasso' else ''}"
        if self.open:
            return f"❔ {_count(self.states)}"
        text = f"✅ {_count(self.states)}{'*' if self.incomplete else ''}"
        if self.hypothesis:
            text += " ❌H" if self.hypothesis == VIOLATED else " H"
        return text + (" ∀" if self.proved else "")


def _count(n: int) -> str:
    for unit, size in (("M", 1_000_000), ("k", 1_000)):
        if n >= size:
            return f"{n / size:.1f}{unit}" if n < 10 * size else f"{n // size}{unit}"
    return str(n)


def cells(rows, hypothesis: dict, unsearched=frozenset()) -> dict:
    """(model, variant, property) -> Cell over the local runs; ``hypothesis`` maps (model, variant)
    to (examples, violated property ids); a property not violated by a variant of ``unsearched`` (model,
    variant) is open."""
    out: dict = defaultdict(Cell)
    sometimes = set()  # a Hypothesis run's steps cannot show that no run has an example
    for name, variant, preset, engine, model, r in rows:
        if engine != "local":
            continue
        sometimes.update((name, pid) for pid, kind in r.properties if kind == "sometimes")
        for pid, _ in r.properties:
            c = out[name, variant, pid]
            c.bounds += 1
            c.states += r.distinct_states
            c.incomplete |= not r.complete
        for v in r.violations:
            shape = "never" if not v.traced else "lasso" if v.loop is not None else "trace"
            out[name, variant, v.prop.id].violations.append((preset, v.length, shape))
    for (name, variant, _), c in out.items():
        c.open = (name, variant) in unsearched and not c.violations
    for (name, variant), (examples, failed) in hypothesis.items():
        for (n, var, pid), c in out.items():
            if (n, var) == (name, variant) and (n, pid) not in sometimes:
                c.hypothesis = VIOLATED if pid in failed else f"holds ({examples} examples)"
    return out


def proved_for_any_size(table: dict, proofs: dict) -> list[str]:
    """Marks each (model, variant, property) cell an unbounded Z3 obligation proved (``proofs``: model ->
    [(Obligation, Verdict)]); returns the cells where the explorer found a violation the proof rules out
    (the encoding and the model disagree: an internal error, never a verdict)."""
    disagree = []
    for name, pairs in proofs.items():
        for o, v in pairs:
            if v.status != "proved":
                continue
            for variant in o.variants:
                for pid in o.proves:
                    c = table.get((name, variant, pid))
                    if c is None:
                        continue
                    if c.violations:
                        disagree.append(f"{name} {variant} {pid}: Z3 `{o.name}` proves it for any size, the "
                                        f"explorer violates it at `{c.violations[0][0]}`")
                    else:
                        c.proved = c.proved or o.name
    return disagree


# -- expectations --------------------------------------------------------------

def verdicts(table: dict) -> dict:
    out: dict = {}
    for (name, variant, pid), c in sorted(table.items()):
        out.setdefault(name, {}).setdefault(variant, {})[pid] = VIOLATED if c.violations else OPEN if c.open else HOLDS
    return out


def compare(expected: dict, got: dict) -> list[str]:
    """Differences for the models in ``got``: a new violation, a finding no longer found, a
    (model, variant, property) that appeared or disappeared. An open verdict contradicts none recorded
    as holding."""
    lines = []
    for name, variants in got.items():
        want = expected.get(name, {})
        for variant in sorted(set(variants) | set(want)):
            a, b = want.get(variant, {}), variants.get(variant, {})
            for pid in sorted(set(a) | set(b)):
                if a.get(pid) != b.get(pid) and (a.get(pid), b.get(pid)) != (HOLDS, OPEN):
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


STEPS_PER_DIAGRAM = 8  # a longer trace is drawn in parts, so each part's text stays readable at page width
CHANGES_PER_MESSAGE = 2
LINE = 28  # characters per line of a message
# Narrower actor boxes and margins than mermaid's defaults (150, 50): more lifelines fit the column.
CONFIG = "---\nconfig:\n  sequence:\n    width: 110\n    actorMargin: 30\n---"


def _wrap(text: str, width: int = LINE) -> list[str]:
    """``text`` in lines of at most about ``width`` characters, broken after commas or spaces."""
    lines, line = [], ""
    for word in re.split(r"(?<=[, ])", text):
        if line and len(line) + len(word.rstrip()) > width:
            lines.append(line.rstrip())
            line = ""
        line += word
    return lines + [line.rstrip()] if line.strip() else lines


class _Reads:
    """A state that records which of its fields are read (to learn what a property looks at)."""

    def __init__(self, state, seen: set):
        object.__setattr__(self, "_state", state)
        object.__setattr__(self, "_seen", seen)

    def __getattr__(self, name):
        self._seen.add(name)
        return getattr(self._state, name)


def fields_read(model: Model, prop, states, actions) -> set[str] | None:
    """The state fields ``prop`` reads on this trace (its check on each step, or its trigger and goal);
    None if a check cannot be evaluated on a recording state."""
    seen: set = set()
    try:
        for i, t in enumerate(states):
            if prop.kind == "invariant":
                prop.check(model, _Reads(t, seen))
            elif prop.kind == "action" and i:
                prop.check(model, _Reads(states[i - 1], seen), actions[i - 1], _Reads(t, seen))
            elif prop.kind == "liveness":
                prop.goal(model, _Reads(t, seen))
                if prop.trigger is not None:
                    prop.trigger(model, _Reads(t, seen))
    except Exception:  # a check that needs the real state (isinstance, attrs.evolve): show every change
        return None
    return seen


def _relevant(changes, fields: set | None):
    """The changes to the fields the property reads (every change when that is unknown)."""
    if fields is None:
        return changes
    mine = [c for c in changes if re.split(r"[.\[]", c[0], maxsplit=1)[0] in fields]
    return mine


def sequence_diagrams(model: Model, states, actions, prop, loop: int | None = None) -> list[str]:
    """The counterexample as mermaid ``sequenceDiagram``s of at most ``STEPS_PER_DIAGRAM`` steps each,
    each with only the participants that act in it. A message is the action and its changes to the
    state the violated property reads; the step that breaks it (or the loop of a lasso) is highlighted."""
    fields = fields_read(model, prop, states, actions)
    steps = []
    for i, a in enumerate(actions, start=1):
        params = dict(a.params)
        src, dst = (_actor(x, params) for x in model.sequence.get(a.name, "System->>System").split("->>"))
        changes = _relevant(list(diff(states[i - 1], states[i])), fields)
        shown = [f"{_short(path, LINE)}: {_short(now, LINE)}" for path, _, now in changes[:CHANGES_PER_MESSAGE]]
        if len(changes) > CHANGES_PER_MESSAGE:
            shown.append(f"… {len(changes) - CHANGES_PER_MESSAGE} more")
        steps.append((src, dst, _text("<br/>".join(_wrap(f"{i}. {a}") + [x for c in shown for x in _wrap(c)]))))
    last, parts = len(steps), []
    for first in range(0, last, STEPS_PER_DIAGRAM):
        part = list(enumerate(steps, start=1))[first:first + STEPS_PER_DIAGRAM]
        seen: list = []
        for _, (src, dst, _) in part:
            seen += [x for x in (src, dst) if x not in seen]
        left, right = _ident(seen[0]), _ident(seen[-1])
        lines = [CONFIG, "sequenceDiagram"] + [f"    participant {_ident(a)} as {a}" for a in seen]
        in_loop = loop is not None and first >= loop + 1 and loop < last
        if in_loop:
            lines.append("    rect rgb(255, 236, 204)")
        for i, (src, dst, text) in part:
            if loop is not None and i == loop + 1:
                lines += ["    rect rgb(255, 236, 204)",
                          f"    Note over {left},{right}: from here the run loops forever"]
                in_loop = True
            if loop is None and i == last:
                lines.append("    rect rgb(255, 221, 221)")
            lines.append(f"    {_ident(src)}->>{_ident(dst)}: {text}")
            if loop is None and i == last:
                lines += [f"    Note over {_ident(dst)}: {prop.id} violated", "    end"]
        if loop is not None and part[-1][0] == last:
            if loop >= last:
                lines.append(f"    Note over {left},{right}: stays here forever: {prop.id} never holds")
            else:
                lines.append(f"    Note over {left},{right}: back to the state after step {loop}: "
                             f"{prop.id} never holds")
        if in_loop:
            lines.append("    end")
        parts.append("\n".join(lines))
    return parts


def step_list(states, actions) -> list[str]:
    """Every step with the whole change it makes to the state, as a numbered list."""
    out = []
    for i, a in enumerate(actions, start=1):
        changes = "; ".join(f"`{path}`: {_short(was, 80)} → {_short(now, 80)}"
                            for path, was, now in diff(states[i - 1], states[i]))
        out.append(f"{i}. `{a}`: {changes or 'no change'}")
    return out


def _scenario(md: str) -> str:
    """The explanation's "Scenario" section."""
    m = re.search(r"^## Scenario\n(.*?)(?=^## |\Z)", md, re.S | re.M)
    return m.group(1).strip() if m else ""


def finding_section(cls: type[Model], f, table: dict | None = None) -> list[str]:
    outcome = replay(f.trace)
    doc = load(f.trace)
    model = model_for(doc, f.trace)
    prop = model.property(f.property)
    fix_cell = table.get((cls.name, f.fix, f.property)) if table else None
    fix = f"`{f.fix}`" + (f" ({fix_cell.markdown()})" if fix_cell else "")
    rel = f"findings/{cls.name}/{f.trace.name}"
    diagrams = sequence_diagrams(model, outcome.states, outcome.actions, prop, doc.get("loop"))
    lines = [f"### {f.title}", "",
             f"**{f.severity.capitalize()}** ({f.loss}, {f.path} path). {f.loses[0].upper() + f.loses[1:]}.", "",
             f"**Property:** `{f.property}` — {prop.statement}. **Bounds:** `{f.bounds}`. "
             f"**Counterexample:** {f.length} steps. "
             f"**Fix:** {fix}.", "",
             _scenario(f.explanation.read_text()), ""]
    for k, diagram in enumerate(diagrams, start=1):
        first = (k - 1) * STEPS_PER_DIAGRAM + 1
        if len(diagrams) > 1:
            lines += [f"Steps {first}-{min(first + STEPS_PER_DIAGRAM - 1, f.length)}:", ""]
        lines += ["```mermaid", diagram, "```", ""]
    return lines + [
        "<details><summary>Every step with its whole state change</summary>", "",
        *step_list(outcome.states, outcome.actions), "", "</details>", "",
        f"Explanation: [`findings/{cls.name}/{f.explanation.name}`](../findings/{cls.name}/{f.explanation.name})",
        "", "```", f"pulsar-verify replay {rel}", f"pulsar-verify replay {rel} --variant {f.fix}", "```",
        "Exit 1: it reproduces; with the fix, exit 0: the fix kills it.", ""]


# -- pages -----------------------------------------------------------------------

def proofs_section(proofs: list) -> list[str]:
    """The Z3 obligations of a model (``proofs``: a list of (Obligation, Verdict)), collapsed."""
    if not proofs:
        return []
    lines = ["<details><summary>Z3 obligations (<code>pulsar-verify prove</code>): "
             f"{sum(v.status == 'proved' for _, v in proofs)} proved, "
             f"{sum(v.status == 'violated' for _, v in proofs)} violated</summary>", "",
             "| obligation | variants | verdict | for any size | seconds |", "|---|---|---|---|---:|"]
    lines += [f"| `{o.name}` | {', '.join(f'`{x}`' for x in o.variants)} | {v.status} | "
              f"{', '.join(f'`{p}`' for p in o.proves) or '—'} | {v.seconds:.2f} |" for o, v in proofs]
    lines += [""] + [f"- `{o.name}`: {o.statement}" +
                     (f" Counterexample: {v.detail}" if v.status != "proved" and v.detail else "") for o, v in proofs]
    return lines + ["", "</details>", ""]


MATRIX_COLUMNS = 5  # variant columns per table, so that each fits an ~890 px column


def _anchor(title: str) -> str:
    """GitHub's anchor for a heading."""
    return "#" + re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")


def _n(count: int, word: str) -> str:
    return f"{count} {word}" + ("" if count == 1 else "s")


def _severities(findings) -> str:
    counts = [(sev, sum(f.severity == sev for f in findings)) for sev in SEVERITIES]
    return ", ".join(f"{n} {sev}" for sev, n in counts if n) or "none"


def _broken(cls, table: dict, variant: str) -> list[str]:
    return [p.id for p in cls.checked_properties()
            if (cls.name, variant, p.id) in table and table[cls.name, variant, p.id].violations]


def _states(rows, name: str, variant: str) -> int:
    return sum(r.distinct_states for n, v, _, e, _, r in rows if n == name and v == variant and e == "local")


def verdict(cls: type[Model], table: dict, rows, found: list) -> str:
    """A sentence or two: what is wrong with the design as written (``found``: its catalogue), and whether
    every fix together holds."""
    findings = [f for f in found if not f.observation]
    n = len(cls.checked_properties())
    bad = _broken(cls, table, cls.baseline())
    text = (f"As written, `{cls.name}` breaks {len(bad)} of its {n} properties within the bounds explored: "
            f"{_n(len(findings), 'finding')} ({_severities(findings)}) and "
            f"{_n(len(found) - len(findings), 'observation')}." if bad else
            f"As written, every one of the {n} properties of `{cls.name}` holds within the bounds explored.")
    best = cls.best_variant()
    if best is None:
        return text
    still = _broken(cls, table, best)
    if still:
        return text + f" **With every fix (`{best}`), {len(still)} still break: {', '.join(still)}.**"
    return text + (f" With every fix (`{best}`), all {n} hold at every in-process bound set "
                   f"({_states(rows, cls.name, best):,} states).")


def model_page(cls: type[Model], table: dict, rows, plots: list[str], proofs: list | None = None) -> str:
    found = sorted(catalogue(cls.name), key=lambda f: (f.rank, f.length))
    findings = [f for f in found if not f.observation]
    observations = [f for f in found if f.observation]
    fixes = [v for v in cls.variants if v.kind != "mutant"]
    mutants = [v for v in cls.variants if v.kind == "mutant"]
    lines = [f"# {cls.title}", "", verdict(cls, table, rows, found), ""]
    if findings:
        lines += ["## Findings, most severe first", "", "| severity | finding | what users lose | steps | fix |",
                  "|---|---|---|---:|---|"]
        lines += [f"| {f.severity} | [{f.title}]({_anchor(f.title)}) | {f.loses} | {f.length} | `{f.fix}` |"
                  for f in findings]
        lines.append("")
    if observations:
        lines += ["## Observations (no user loses anything)", "", "| observation | why nobody loses | steps |",
                  "|---|---|---:|"]
        lines += [f"| [{f.title}]({_anchor(f.title)}) | {f.loses} | {f.length} |" for f in observations]
        lines.append("")
    if len(fixes) > 1:
        lines += ["## Fixes", "", "| variant | closes | properties still broken |", "|---|---|---|"]
        for v in fixes[1:]:
            closes = [f"[{f.name}]({_anchor(f.title)})" for f in found if f.fix == v.name or
                      (v.name == cls.best_variant() and f.fix in v.fixes)]
            still = _broken(cls, table, v.name)
            lines.append(f"| `{v.name}` | {', '.join(closes) or '—'} | "
                         f"{', '.join(f'`{p}`' for p in still) or 'none: every property holds'} |")
        lines += ["", "Each fix: " + "; ".join(f"`{v.name}`, {v.description}" for v in fixes[1:]) + ".", ""]
    lines += ["## Properties by variant", "",
              f"Verdicts at the in-process bound sets `{'`, `'.join(cls.in_process_presets())}`: ✅ holds, with the "
              "states explored (`*`: a bound cut the search; `H`: Hypothesis holds too), exhaustive at these "
              "bounds only unless `∀`: a Z3 obligation proves it for any size too; ❌ bound set·length of the "
              "shortest counterexample (`↻`: a lasso).", ""]
    props = cls.checked_properties()
    for k in range(0, len(fixes), MATRIX_COLUMNS):
        chunk = fixes[k:k + MATRIX_COLUMNS]
        lines += ["| property | " + " | ".join(f"`{v.name}`" for v in chunk) + " |", "|---|" + "---|" * len(chunk)]
        for p in props:
            lines.append(f"| `{p.id}` | " + " | ".join(
                table[cls.name, v.name, p.id].compact() if (cls.name, v.name, p.id) in table else "—" for v in chunk)
                + " |")
        lines.append("")
    lines += [f"- `{p.id}` ({p.kind}): {p.statement}. *{p.section}*" for p in props] + [""]
    if mutants:
        lines += ["## Deliberately broken variants", "",
                  "Each is `all-fixes` plus one mistake; the properties it breaks show that the checks can fail.", ""]
        if any(table[cls.name, v.name, p.id].open for v in mutants for p in cls.checked_properties()
               if (cls.name, v.name, p.id) in table):
            lines += ["The review's runs of a mutant stop once it has broken every property `expectations.json` "
                      "records it breaking, the bound set whose `all-fixes` run has fewest states first; each "
                      "counterexample is still the shortest at its bounds. Whether it breaks more is left open "
                      "here, and decided by `--nightly` and `--update-expectations`, which search every run whole.", ""]
        lines += ["| mutant | the mistake | breaks |", "|---|---|---|"]
        lines += [f"| `{v.name}` | {v.description} | "
                  f"{', '.join(f'`{b}`' for b in _broken(cls, table, v.name)) or '—'} |" for v in mutants]
        lines.append("")
    if found:
        lines += ["## Each finding and observation", ""]
        for f in found:
            lines += finding_section(cls, f, table)
    lines += proofs_section(proofs or [])
    if plots:
        lines += ["## State space and coverage", ""] + [f"![{p}]({p})" for p in plots] + [""]
    mine = [(variant, preset, engine, r) for name, variant, preset, engine, _, r in rows if name == cls.name]
    reused = sum(1 for *_, r in mine if r.reused_from)
    lines += [f"<details><summary>Every run ({len(mine)})</summary>", ""]
    if reused:
        lines += [f"{reused} of these runs are another variant's run at the same bounds (\"as `as-written`\" "
                  "under seconds): every question the model asked of its variant in that run (is this fix "
                  "applied? is this the variant named?) has the same answer under both, so the runs are the "
                  "same, state for state (`pulsar_verify/asked.py`).", ""]
    lines += ["| variant | bounds | engine | states | depth | seconds | violated |", "|---|---|---|---:|---:|---:|---|"]
    lines += [f"| `{variant}` | `{preset}` | {engine} | {r.distinct_states:,} | "
              f"{r.depth}{f' (stopped: {r.stopped})' if r.stopped else ''} | "
              f"{f'as `{r.reused_from}`' if r.reused_from else f'{r.seconds:.2f}'} | "
              f"{', '.join(v.prop.id for v in r.violations) or '—'} |" for variant, preset, engine, r in mine]
    return "\n".join(lines + ["", "</details>"]) + "\n"


def index_page(classes, table: dict, rows, mismatches: list[str] | None, mutation: tuple[dict, str] = ({}, "")) -> str:
    """``mutation``: (model -> its mutation score and counts, where the scores come from)."""
    scores, source = mutation
    head = ["| model | " + " | ".join(SEVERITIES) + " | observations | all fixes | states | mutation score |",
            "|---|" + "---:|" * (len(SEVERITIES) + 1) + "---|---:|---:|"]
    body, every = [], []
    for cls in classes:
        found = catalogue(cls.name)
        every += [f for f in found if not f.observation]
        best = cls.best_variant()
        still = _broken(cls, table, best) if best else []
        best_text = "—" if best is None else (f"❌ {len(still)} broken" if still else "✅ all hold")
        states = sum(r.distinct_states for n, _, _, _, _, r in rows if n == cls.name)
        body.append(f"| [`{cls.name}`]({cls.name}.md) | " +
                    " | ".join(str(sum(f.severity == sev for f in found)) for sev in SEVERITIES) +
                    f" | {sum(f.observation for f in found)} | {best_text} | {states:,} "
                    f"| {_mutation_cell(scores.get(cls.name))} |")
    lines = ["# pulsar-verify design review", "",
             f"{_n(len(every), 'finding')} in {_n(len(classes), 'model')} ({_severities(every)}). Each model's page "
             "opens with its verdict and its findings, most severe first, then the fixes and what each closes.", ""]
    lines += head + body
    if scores:
        lines += ["", f"Mutation score: of the model's mutants that no argument shows equivalent, the share a "
                      f"verdict or a shortest counterexample changed for (a crash of the mutated model is not "
                      f"counted), from {source}."]
    if mismatches is not None:
        lines += ["", "## Expectations", ""]
        lines += ["Every verdict is the one `expectations.json` records."] if not mismatches else (
            ["Verdicts that differ from `expectations.json`:", ""] + [f"- {m}" for m in mismatches])
    return "\n".join(lines) + "\n"


def _mutation_cell(score: dict | None) -> str:
    if not score:
        return "—"
    return f"{score['score']}% ({score['killed']} of {score['mutants'] - score['equivalent']})"


def plots(out: Path, name: str, rows) -> list[str]:
    """PNG plots of distinct states per BFS level (as written, each bound set) and of action
    coverage (as written, all bound sets together)."""
    import matplotlib
    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    baseline = registry.model_class(name).baseline()
    mine = [(preset, r) for n, variant, preset, engine, _, r in rows
            if n == name and variant == baseline and engine == "local"]
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
