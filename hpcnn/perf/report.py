"""The end-of-session table: every combination, baseline, current, ratio, interval, verdict."""

from __future__ import annotations

from typing import List, Optional, Tuple

from hpcnn.perf.gate import Verdict

Row = Tuple[str, Optional[Verdict], str]  # key, verdict (None: no baseline), note


def format_table(rows: List[Row], title: str) -> List[str]:
    """Fixed-width lines for the terminal."""
    width = max([len(k) for k, _, _ in rows] + [11])
    head = f"{'combination':<{width}}  {'baseline':>9}  {'current':>9}  {'ratio':>6}  {'95% CI':>15}  verdict"
    lines = [title, head, "-" * len(head)]
    for key, v, note in rows:
        if v is None:
            lines.append(f"{key:<{width}}  {'-':>9}  {'-':>9}  {'-':>6}  {'-':>15}  {note}")
        else:
            ci = f"[{v.ci_low:.3f}, {v.ci_high:.3f}]"
            lines.append(f"{key:<{width}}  {v.baseline_median:9.2f}  {v.current_median:9.2f}  {v.ratio:6.3f}  "
                         f"{ci:>15}  {v.verdict}{' ' + note if note else ''}")
    return lines
