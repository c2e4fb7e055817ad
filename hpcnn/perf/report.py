"""The end-of-session table: every combination, baseline, current, ratio, interval, MDS, verdict."""

from __future__ import annotations

from typing import List, Optional, Tuple

from hpcnn.perf.gate import Verdict

Row = Tuple[str, Optional[Verdict], str]  # key, verdict (None: no baseline), note


def _mds(v: Verdict) -> str:
    if v.mds is None:
        return "?"
    return f"{v.mds:.1%}" + ("!" if v.weak else "")


def format_table(rows: List[Row], title: str) -> List[str]:
    """Fixed-width lines for the terminal; an MDS marked ! is above its threshold (a weak gate there)."""
    width = max([len(k) for k, _, _ in rows] + [11])
    head = (f"{'combination':<{width}}  {'baseline':>9}  {'current':>9}  {'ratio':>6}  {'95% CI':>15}  "
            f"{'MDS':>7}  verdict")
    lines = [title, head, "-" * len(head)]
    weak = False
    for key, v, note in rows:
        if v is None:
            lines.append(f"{key:<{width}}  {'-':>9}  {'-':>9}  {'-':>6}  {'-':>15}  {'-':>7}  {note}")
            continue
        weak |= v.weak
        ci = f"[{v.ci_low:.3f}, {v.ci_high:.3f}]"
        extra = "; ".join(x for x in (note, v.evidence) if x)
        lines.append(f"{key:<{width}}  {v.baseline_median:9.2f}  {v.current_median:9.2f}  {v.ratio:6.3f}  "
                     f"{ci:>15}  {_mds(v):>7}  {v.verdict} ({extra})")
    if weak:
        lines.append("MDS!: the minimum detectable slowdown is above the threshold; a drop of the threshold's size "
                     "usually passes there (record more sessions, or use paired mode)")
    return lines
