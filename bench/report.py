"""The results table: each figure with its same-run limit, the ratio, and the target verdict."""

from __future__ import annotations

from bench.harness import Figure


def _num(value: float | None) -> str:
    if value is None:
        return "-"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    if abs(value) >= 100:
        return f"{value:.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def print_table(figures: list[Figure]) -> None:
    """Print one row per figure: bench, what, value unit, limit, ratio, target, verdict, note."""
    if not figures:
        print("(no figures)")
        return
    rows = []
    for f in figures:
        verdict = "" if f.met is None else ("met" if f.met else "MISSED")
        limit = f"{_num(f.limit_value)} {f.limit_name}" if f.limit_name else ""
        ratio = f"{f.ratio:.2f}" if f.ratio is not None else ""
        rows.append((f.bench, f.name, f"{_num(f.value)} {f.unit}", limit, ratio, f.target or "", verdict, f.note))
    header = ("bench", "measurement", "value", "same-run limit", "ratio", "target", "", "note")
    widths = [max(len(str(r[i])) for r in rows + [header]) for i in range(len(header))]
    widths[-1] = min(widths[-1], 60)

    def line(cells) -> str:
        return "  ".join(
            str(c)[: widths[i]].ljust(widths[i]) if i != 2 else str(c).rjust(widths[i]) for i, c in enumerate(cells)
        ).rstrip()

    print(line(header))
    print(line(["-" * w for w in widths]))
    for row in rows:
        print(line(row))
