"""The "where the time goes" table and bars of ``ios-bench profile --frameworks`` (the figures
come from ``ios_bench.profiling``): rows the IR operators in topological order, one row each (a
group a framework fused is shown once, on its last operator's row, "with" the others it covers,
which say "in" that row), or the op kinds; for an imported model, beside each operator the model's own
node names it computes (``ios_core.ir.meta.SOURCE_NODES``: what Netron and the frameworks' profilers show);
one column per framework with time and share of the end-to-end latency; then "fused, unmapped",
"gaps and overhead" and the end-to-end latency, so every column sums to its latency; then the
profiled run's latency and the profiler's own cost. Numbers through ``reporting.numbers.fmt``."""

from __future__ import annotations

from pathlib import Path

from ios_bench.profiling import KINDS, OVERHEAD, UNMAPPED
from ios_bench.reporting.numbers import fmt
from ios_core.ir.meta import source_nodes

LABEL_WIDTH = 40


def kind_totals(result: dict) -> dict[str, float]:
    """A profiled framework's attributed time per op kind (in :data:`KINDS` order)."""
    out: dict[str, float] = {}
    for row in result.get("rows", []):
        out[row["kind"]] = out.get(row["kind"], 0.0) + row["ms"]
    return {k: out[k] for k in KINDS if k in out}


def _share(ms: float, latency: float) -> str:
    return f"{fmt(ms)} {fmt(100 * ms / latency, 1)}%" if latency > 0 else fmt(ms)


def _label(name: str) -> str:
    return name if len(name) <= LABEL_WIDTH else name[:LABEL_WIDTH - 1] + "…"


def names_header(graph) -> str | None:
    """The header of the column of an imported model's own node names (``ONNX nodes``: what Netron,
    onnxruntime's profile and OpenVINO's layer names show), or None for a graph without any (the zoo's)."""
    if graph is None or not any(source_nodes(op) for op in graph.operators()):
        return None
    return f"{str((graph.source or {}).get('format') or 'onnx').upper()} nodes"  # the ONNX importer's, by default


def extra_columns(result: dict) -> list[str]:
    """The columns a framework's profile adds beside its time in the per-operator table: "self"
    where its profiler gives each row's self time beside its total (torch), "kernel" where it names
    the kernel each layer ran (OpenVINO's exec_type)."""
    if "error" in result:
        return []
    rows = result.get("rows", [])
    out = []
    if any("self_ms" in row for row in rows):
        out.append("self")
    if any(row.get("exec_types") for row in rows):
        out.append("kernel")
    return out


def _extra_cell(row: dict | None, what: str) -> str:
    if row is None:
        return "-"
    if what == "self":
        return fmt(row["self_ms"]) if "self_ms" in row else "-"
    return ",".join(dict.fromkeys(row.get("exec_types", {}).values())) or "-"


def _merged(kept: dict | None, row: dict) -> dict:
    """Two profile rows shown on one operator's row (groups that end on the same operator): their
    self times added, their kernels together."""
    if kept is None:
        return row
    out = {**kept, "exec_types": {**kept.get("exec_types", {}), **row.get("exec_types", {})}}
    if "self_ms" in kept or "self_ms" in row:
        out["self_ms"] = kept.get("self_ms", 0.0) + row.get("self_ms", 0.0)
    return out


def table_rows(graph, results: list[dict], by: str = "op") -> tuple[list[str], list[list[str]]]:
    """``(header, rows)`` of the table: text cells, first column the operator (group) or kind; per
    operator, a framework's :func:`extra_columns` follow its own."""
    ok = [r for r in results if "error" not in r]
    columns = [(r, what) for r in results for what in ("ms", *(extra_columns(r) if by == "op" else ()))]
    header = ["operator" if by == "op" else "kind",
              *(r["framework"] if what == "ms" else f"{r['framework']} {what}" for r, what in columns)]
    names = names_header(graph) if by == "op" else None  # an imported model's node names, beside our operators
    if names:
        header.insert(1, names)
    cells: dict = {}
    labels: dict = {}
    found: dict = {}  # (operators, framework) -> its profile row
    notes: dict = {}  # (operator, framework) -> what the cell says beside (or instead of) its time
    if by == "op":  # one row per IR operator; a fused group's time once, on its last operator's row
        from ios_bench.profiling import kind_of

        order = {op.name: i for i, op in enumerate(graph.operators())}
        sources = {op.name: source_nodes(op) for op in graph.operators()}
        for op in graph.operators():
            cells[(op.name,)] = {}
            labels[(op.name,)] = f"{op.name} ({kind_of(op)})"
        for r in ok:
            fw = r["framework"]
            covered: dict[str, set] = {}  # operator -> the anchors of the groups that cover it elsewhere
            with_ops: dict[str, set] = {}  # anchor -> the other operators its groups cover
            for row in r["rows"]:
                ops = sorted(row["operators"], key=lambda n: order.get(n, len(order)))
                anchor = (ops[-1],)
                cell = cells.setdefault(anchor, {})
                cell[fw] = cell.get(fw, 0.0) + row["ms"]
                found[(anchor, fw)] = _merged(found.get((anchor, fw)), row)
                labels.setdefault(anchor, f"{ops[-1]} (not in the graph)")
                for n in ops[:-1]:
                    covered.setdefault(n, set()).add(ops[-1])
                    with_ops.setdefault(ops[-1], set()).add(n)
            for n, others in with_ops.items():
                notes[((n,), fw)] = "with " + ",".join(sorted(others, key=lambda m: order.get(m, 0)))
            for n, anchors in covered.items():
                text = "in " + ",".join(sorted(anchors, key=lambda m: order.get(m, 0)))
                notes[((n,), fw)] = f"{notes[((n,), fw)]}; {text}" if ((n,), fw) in notes else text
        keys = sorted(cells, key=lambda k: order.get(k[0], len(order)))
    else:
        for r in ok:
            for kind, ms in kind_totals(r).items():
                cells.setdefault((kind,), {})[r["framework"]] = ms
        keys = [(k,) for k in KINDS if (k,) in cells]
        labels = {k: k[0] for k in keys}
    rows = []
    for key in keys:
        line = [_label(labels[key])]
        if names:  # the names whole in the JSON (rows' source_nodes), cut to the column here
            line.append(_label(", ".join(sources.get(key[0], ()))) or "-")
        for r, what in columns:
            if what != "ms":
                line.append(_extra_cell(found.get((key, r["framework"])), what))
                continue
            ms = cells[key].get(r["framework"])
            note = notes.get((key, r["framework"]))
            if ms is None or "error" in r:
                line.append(f"({note})" if note and "error" not in r else "-")
            else:
                line.append(_share(ms, r["latency_ms"]) + (f" ({note})" if note else ""))
        rows.append(line)

    def footer(label, value):
        rows.append([label, *([""] if names else []), *(("n/a" if "error" in r else value(r)) if what == "ms" else ""
                                                      for r, what in columns)])

    footer(UNMAPPED, lambda r: _share(r["unmapped_ms"], r["latency_ms"]))
    footer(OVERHEAD, lambda r: _share(r["overhead_ms"], r["latency_ms"]))
    footer("end-to-end (unprofiled)", lambda r: f"{fmt(r['latency_ms'])} 100%")
    footer("attributed share", lambda r: f"{fmt(100 * r['attributed_share'], 1)}%")
    footer("attributed / profiled", lambda r: f"{fmt(100 * r['attributed_over_profiled'], 1)}%"
           + (" (!)" if r.get("overlap") else "") if r.get("attributed_over_profiled") is not None else "-")
    footer("profiled run", lambda r: fmt(r["profiled_ms"]))
    footer("profiler's cost", profiler_cost_cell)
    footer("energy / inference", lambda r: f"{fmt(1000 * r['joules_per_inference'])} mJ, {fmt(r['average_watts'])} W"
           if "joules_per_inference" in r else "-")
    return header, rows


def profiler_cost_cell(result: dict) -> str:
    """The profiler's cost as the table shows it: the change, and its interval where the profile
    took one (interleaved rounds: ``ios_bench.profiling.profiler_cost_figures``)."""
    text = f"{100 * result['profiler_cost']:+.1f}%"
    lo, hi = result.get("profiler_cost_low"), result.get("profiler_cost_high")
    if lo is not None and hi is not None:
        text += f" [{100 * lo:+.1f}, {100 * hi:+.1f}]"
    return text


FOOTERS = 8  # the footer rows table_rows adds after the operators' (a rule is drawn above them)


def render(graph, results: list[dict], by: str = "op") -> str:
    """The table as aligned text, then one line per framework that could not be profiled."""
    header, rows = table_rows(graph, results, by)
    widths = [max(len(line[i]) for line in (header, *rows)) for i in range(len(header))]
    left = 2 if by == "op" and names_header(graph) else 1  # the text columns, left-aligned
    out = []
    for j, line in enumerate((header, *rows)):
        out.append("  ".join(c.ljust(widths[i]) if i < left else c.rjust(widths[i]) for i, c in enumerate(line)))
        if j == 0 or j == len(rows) - FOOTERS:
            out.append("  ".join("-" * w for w in widths))
    out.append(f"ms per inference and share of the unprofiled end-to-end latency; one row per IR operator: a "
               "group of operators a framework ran as one (fused) is timed once, on its last operator's row (with "
               "X: the others it covers), and each of those says where its time is (in Y); "
               f"{UNMAPPED}: what the profiler "
               f"timed but names no IR operator; {OVERHEAD}: latency minus everything profiled (negative: what the "
               "profiler timed adds up to more than the unprofiled call, because operators ran at the same time "
               "and each counts its own time, or because the profiler slowed each operator: see the profiler's "
               "cost); attributed / profiled: the attributed time over the profiled call's; the profiler's cost: the "
               "profiled call over the unprofiled one, from rounds of each in alternating order, with its 95% "
               "paired interval"
               + ("; self: the framework's self time of the row (its total less its child events': for torch, "
                  "the range's own Python and dispatch)" if any("self" in extra_columns(r) for r in results) else "")
               + ("; kernel: the kernel each layer ran (OpenVINO's exec_type)"
                  if any("kernel" in extra_columns(r) for r in results) else "")
               + (f"; {names_header(graph)}: the model's own nodes each operator computes (those folded into it "
                  f"too), as Netron and the frameworks' own profilers name them, cut to {LABEL_WIDTH} characters "
                  "here (whole in --format json: each row's source_nodes)" if left == 2 else ""))
    for r in results:
        if "error" in r:
            out.append(f"{r['framework']}: {r['error']}")
        elif r.get("overlap"):
            out.append(f"(!) {r['framework']}: {r['overlap']}")
    for r in results:
        if r.get("trace"):
            out.append(f"{r['framework']}: its profiler's own events, a Chrome trace (Perfetto): {r['trace']}")
    for note in dict.fromkeys(r["energy"] for r in results if "energy" in r):
        out.append(f"energy: {note}")
    return "\n".join(out)


def plot(results: list[dict], path: Path, title: str = "") -> Path:
    """One stacked bar per profiled framework: attributed time by op kind, then fused/unmapped
    and gaps and overhead (a negative overhead is left out of the bar and stated in its label)."""
    from ios_bench.reporting.plotting import pyplot, save_png, series_styles

    ok = [r for r in results if "error" not in r]
    if not ok:
        raise ValueError("no framework could be profiled: nothing to plot")
    plt = pyplot()
    segments = [k for k in KINDS if any(k in kind_totals(r) for r in ok)] + [UNMAPPED, OVERHEAD]
    styles = series_styles(segments)
    fig, ax = plt.subplots(figsize=(1.6 + 1.1 * len(ok), 4.2))
    labelled: set[str] = set()
    for i, r in enumerate(ok):
        bottom = 0.0
        for seg in segments:
            v = values_of(r, seg)
            if v <= 0:
                continue
            ax.bar(i, v, bottom=bottom, color=styles[seg]["color"], hatch=styles[seg]["hatch"], edgecolor="white",
                   label=None if seg in labelled else seg)
            labelled.add(seg)
            bottom += v
    ax.set_xticks(range(len(ok)))
    # where the operators' profiled times add up to more than the unprofiled latency (the profiler's
    # own cost inside them): by how much, so a bar taller than the latency is explained
    ax.set_xticklabels([r["framework"] + ("" if r["overhead_ms"] >= 0 else
                                          f"\n(operators {fmt(-r['overhead_ms'])} ms over it)")
                        for r in ok], rotation=20, ha="right", fontsize=8)
    ax.set_ylabel("ms per inference (unprofiled latency)")
    ax.set_title(title or "where the time goes", fontsize=10)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return save_png(fig, Path(path))


def plot_timeline(bars: list[dict], path: Path, title: str = "") -> Path:
    """IOS's timeline (a profiled call's ``timeline``, ``Runtime.timeline``): one row per worker
    (0: the calling thread), one horizontal bar per stage's task from its start to its end (ms from
    the call's start), coloured by stage and labelled with its groups' operators."""
    from ios_bench.reporting.plotting import pyplot, save_png, series_styles

    if not bars:
        raise ValueError("no timeline: nothing to plot")
    plt = pyplot()
    workers = sorted({b["worker"] for b in bars})
    styles = series_styles([f"stage {b['stage']}" for b in sorted(bars, key=lambda b: b["stage"])])
    fig, ax = plt.subplots(figsize=(9.0, 1.2 + 0.5 * len(workers)))
    for b in bars:
        st = styles[f"stage {b['stage']}"]
        width = b["end_ms"] - b["start_ms"]
        ax.barh(workers.index(b["worker"]), width, left=b["start_ms"], height=0.6, color=st["color"],
                hatch=st["hatch"], edgecolor="black", linewidth=0.4)
        label = " | ".join("+".join(g) for g in b["groups"])
        ax.text(b["start_ms"] + width / 2, workers.index(b["worker"]), label if len(label) < 18 else f"s{b['stage']}",
                ha="center", va="center", fontsize=6, clip_on=True)
    ax.set_yticks(range(len(workers)))
    ax.set_yticklabels(["caller" if w == 0 else f"worker {w}" for w in workers], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(left=0.0)
    ax.set_xlabel("ms from the call's start (one profiled call)")
    ax.set_title(title or "IOS: stages per worker", fontsize=10)
    return save_png(fig, Path(path))


def timeline_path(path: Path) -> Path:
    """Where ``--plot FILE.png`` puts IOS's timeline: ``FILE-ios-timeline.png`` beside it."""
    path = Path(path)
    return path.with_name(f"{path.stem}-ios-timeline.png")


def values_of(result: dict, segment: str) -> float:
    """The height of ``segment`` in ``result``'s bar."""
    if segment == UNMAPPED:
        return result["unmapped_ms"]
    if segment == OVERHEAD:
        return max(result["overhead_ms"], 0.0)
    return kind_totals(result).get(segment, 0.0)


def report_sections(run_folder, out, table_cls) -> list[tuple[str, list]]:
    """The report's "Where the time goes" section for the cells ``run --profile`` profiled
    (``profile.json`` in the run folder): per (model, batch size, device) the per-kind table and
    the stacked bars; none without the file."""
    import json

    from ios_bench.profiling import PROFILE_FILE
    from ios_bench.reporting.escape import file_part

    path = Path(run_folder) / PROFILE_FILE
    if not path.is_file():
        return []
    try:
        data = json.loads(path.read_text())
        entries = [(str(e["model"]), int(e["batch_size"]), str(e["device"]), list(e["results"])) for e in data]
    except (OSError, ValueError, KeyError, TypeError) as e:
        return [("Where the time goes", [("warn", f"{PROFILE_FILE}: unreadable ({type(e).__name__})")])]
    items: list = [("text", "Each framework's own profiler on the same graph, mapped to the IR operators by name "
                            "(separate profiled runs: no cell's figures come from them); columns sum to the "
                            "unprofiled latency. Per operator: `ios-bench profile --model M --frameworks ...`.")]
    for model, bs, device, results in entries:
        header, rows = table_rows(None, results, "kind")
        items.append(table_cls(f"{model}, batch {bs}, {device}: ms per inference by op kind (share)", header, rows,
                               note="; ".join([f"{r['framework']}: {r['error']}" for r in results if "error" in r]
                                              + [f"(!) {r['framework']}: {r['overlap']}" for r in results
                                                 if r.get("overlap") and "error" not in r])))
        if any("error" not in r for r in results):
            png = Path(out) / f"where_time_goes_{file_part(model)}_{file_part(device)}_b{bs}.png"
            plot(results, png, f"{model}, batch {bs}, {device}: where the time goes")
            items.append(("img", png.name, f"{model}, batch {bs}: where the time goes, per framework"))
        traces = [f"{r['framework']}: `{r['trace']}`" for r in results if r.get("trace") and "error" not in r]
        if traces:
            items.append(("text", "The frameworks' own profiler events (Chrome trace / Perfetto JSON, in the run "
                                  "folder): " + "; ".join(traces) + "."))
        for r in results:
            if r.get("timeline"):
                tl = plot_timeline(r["timeline"], timeline_path(png),
                                   f"{model}, batch {bs}, {device}: IOS stages per worker")
                items.append(("img", tl.name, f"{model}, batch {bs}: IOS's stages per worker (one profiled call)"))
    return [("Where the time goes", items)]
