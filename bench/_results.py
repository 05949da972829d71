"""Results: what one run of the suite measured, as msgspec Structs, and its tables.

Rules:
  * A figure keeps its value from every repetition (``runs``), in repetition
    order, so that a ratio pairs values measured side by side in the same
    repetition, never values from different moments of the run.
  * Figures are reported as median and spread (lowest and highest run).
  * The machine's description travels with the figures: results from two
    machines, or from one machine under different load, are not comparable.
"""

from __future__ import annotations

import statistics

import msgspec


class Machine(msgspec.Struct, frozen=True, kw_only=True):
    kernel: str
    cpu_model: str
    cpus: int
    python: str
    libfuse: str
    pyfuse3: str
    #: 1, 5 and 15 minute load averages when the run started and ended.
    load_average_start: tuple[float, float, float]
    load_average_end: tuple[float, float, float]
    #: ``git describe --always --dirty`` of the tree that was measured.
    commit: str
    started: str


class Figure(msgspec.Struct, frozen=True, kw_only=True):
    """One measured quantity, in one cell of a table."""

    group: str
    row: str
    column: str
    unit: str
    runs: list[float]
    median: float
    low: float
    high: float


class FrameShare(msgspec.Struct, frozen=True):
    """A stack frame and the share of busy samples in which it is on the stack."""

    label: str
    frame: str
    percent: float


class Profile(msgspec.Struct, frozen=True, kw_only=True):
    """py-spy samples of the daemon's thread while benchmark 1's writers ran."""

    writers: int
    #: Writes/s while profiled (sampling slows the daemon down).
    rate: float
    samples: int
    #: Samples in epoll_wait: the daemon waiting for the next request.
    idle_samples: int
    #: Inclusive shares of the write path's parts (of busy samples).
    breakdown: list[FrameShare]
    #: Frames most often at the top of the stack (self time, of busy samples).
    top_self: list[FrameShare]


class Results(msgspec.Struct, frozen=True, kw_only=True):
    machine: Machine
    repeats: int
    write_seconds: float
    duration_s: float
    figures: list[Figure]
    profiles: list[Profile]


class Recorder:
    """Collects one value per repetition for each (group, row, column) cell."""

    def __init__(self) -> None:
        self._cells: dict[tuple[str, str, str], tuple[str, list[float]]] = {}

    def add(self, group: str, row: str, column: str, unit: str, value: float) -> None:
        self._cells.setdefault((group, row, column), (unit, []))[1].append(value)

    def has(self, group: str, row: str, column: str) -> bool:
        return (group, row, column) in self._cells

    def runs(self, group: str, row: str, column: str) -> list[float]:
        return self._cells[(group, row, column)][1]

    def add_ratio(self, group: str, row: str, column: str,
                  numerator: tuple[str, str], denominator: tuple[str, str]) -> None:
        """A ratio cell: each repetition's numerator over that repetition's denominator.

        ``numerator`` and ``denominator`` are (row, column) cells of ``group``.
        """
        top = self.runs(group, *numerator)
        bottom = self.runs(group, *denominator)
        for a, b in zip(top, bottom, strict=True):
            self.add(group, row, column, "×", a / b if b else float("nan"))

    def figures(self) -> list[Figure]:
        return [Figure(group=group, row=row, column=column, unit=unit, runs=runs,
                       median=statistics.median(runs), low=min(runs), high=max(runs))
                for (group, row, column), (unit, runs) in self._cells.items()]


def count(n: int, one: str, many: str) -> str:
    """A column heading: ``1 writer``, ``4 writers``."""
    return f"{n} {one if n == 1 else many}"


def format_value(value: float, unit: str) -> str:
    """Three significant digits; k/M for rates and counts, thousands separators otherwise."""
    if value != value:  # NaN: a denominator was 0
        return "n/a"
    if unit == "×":
        return f"{value:.3g}×"
    if unit not in ("ms", "µs", "s"):
        for scale, suffix in ((1e6, "M"), (1e3, "k")):
            if abs(value) >= scale:
                return f"{value / scale:.3g}{suffix}"
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def render_tables(figures: list[Figure]) -> str:
    """One Markdown table per group: rows × columns, "median (low–high)" cells.

    A row is labelled with the unit of its measured cells; ratio cells (×)
    may share a row with the cells they were computed from.
    """
    groups: dict[str, list[Figure]] = {}
    for figure in figures:
        groups.setdefault(figure.group, []).append(figure)
    out: list[str] = []
    for group, members in groups.items():
        columns = list(dict.fromkeys(f.column for f in members))
        units: dict[str, str] = {}  # row -> unit of its measured cells, in order
        for f in members:
            units.setdefault(f.row, "")
            if f.unit != "×":
                units[f.row] = f.unit
        cells = {(f.row, f.column): f for f in members}
        out.append(f"### {group}\n")
        out.append("| | " + " | ".join(columns) + " |")
        out.append("|---|" + "---|" * len(columns))
        for row, unit in units.items():
            line = [f"{row} ({unit})" if unit else row]
            for column in columns:
                cell = cells.get((row, column))
                if cell is None:
                    line.append("")
                elif cell.low == cell.high:
                    line.append(format_value(cell.median, cell.unit))
                else:
                    line.append(f"{format_value(cell.median, cell.unit)} "
                                f"({format_value(cell.low, cell.unit)}–"
                                f"{format_value(cell.high, cell.unit)})")
            out.append("| " + " | ".join(line) + " |")
        out.append("")
    return "\n".join(out)


def render_profile(profile: Profile) -> str:
    busy = profile.samples - profile.idle_samples
    lines = [f"### Daemon profile, {profile.writers} writer(s): {profile.samples} samples, "
             f"{busy} busy ({100 * busy / max(profile.samples, 1):.0f}%), "
             f"{format_value(profile.rate, '/s')} writes/s while sampled\n",
             "| part of the write path | frame | % of busy samples |", "|---|---|---|"]
    lines += [f"| {s.label} | {f'`{s.frame}`' if s.frame else ''} | {s.percent:.1f} |"
              for s in profile.breakdown]
    lines += ["", "| top self frames | % of busy samples |", "|---|---|"]
    lines += [f"| `{s.frame}` | {s.percent:.1f} |" for s in profile.top_self]
    return "\n".join(lines) + "\n"
