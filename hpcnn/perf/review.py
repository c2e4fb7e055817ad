"""``hpcnn-perf review``: what a baselines file lets the stored gate see, per combination.

Before trusting (or committing) a runner's baselines, its maintainer wants the
figures the gate will judge with: how many sessions on how many occasions, how
far each combination follows the runner's speed, the spread between sessions,
and the minimum detectable slowdown for a session on a new occasion (as CI's
are) and within the hour of the newest one. These are the figures ``save``
derives and the gate computes, read from the file and nothing else.
"""

from __future__ import annotations

import dataclasses
import statistics
from typing import List, Optional

from hpcnn.perf import gate, stored
from hpcnn.perf.baselines import Baselines


@dataclasses.dataclass(frozen=True)
class Row:
    """One combination: sessions per occasion, images/sec (median of raw session medians), its slope on the
    yardstick (None: judged raw), the spread of log session level within an occasion, the MDS of a session on
    a new occasion and within the hour of the newest one (None: unknown), and its threshold."""

    key: str
    sessions: List[int]
    images_per_sec: float
    slope: Optional[float]
    spread: Optional[float]
    mds_new_occasion: Optional[float]
    mds_within_hour: Optional[float]
    threshold: float

    @property
    def weak(self) -> bool:
        """The MDS on a new occasion is above the threshold (or unknown): a drop of that size usually passes."""
        return self.mds_new_occasion is None or self.mds_new_occasion > self.threshold


def rows(b: Baselines, alpha: float = gate.DEFAULT_ALPHA) -> List[Row]:
    """Every combination of ``b`` as the gate sees it, each at its share of the family-wise ``alpha``, with the
    runner at the median of its recorded speeds."""
    each = gate.combination_alpha(alpha, len(b.combinations))
    out = []
    for key in sorted(b.combinations):
        sessions, reference = b.judged_sessions(key)
        occasion = b.occasions(key)
        noise = stored.moderated_noise(sessions, b.prior(), occasion, b.fitted(key))
        out.append(Row(key, [occasion.count(g) for g in sorted(set(occasion))],
                       statistics.median(statistics.median(s) for s in b.sessions(key)),
                       b.slope(key).beta if reference else None, noise.sigma if noise else None,
                       b.next_session_mds(key, each), b.next_session_mds(key, each, new_occasion=False),
                       b.combinations[key].get("threshold", gate.STORED_THRESHOLD)))
    return out


def _pct(x: Optional[float], weak: bool = False) -> str:
    return ("?" if x is None else f"{x:.1%}") + ("!" if weak else "")


def format_review(b: Baselines, path: str, alpha: float = gate.DEFAULT_ALPHA) -> List[str]:
    """The review for the terminal: what the file holds, the figures pooled over its combinations, then a
    fixed-width row per combination; an MDS marked ! is above its threshold."""
    table = rows(b, alpha)
    dates = sorted(s["date"] for c in b.combinations.values() for s in c["sessions"] if s.get("date"))
    most = max(table, key=lambda r: sum(r.sessions))
    drift, prior, slope = b.drift(), b.prior(), b.slope()
    lines = [f"{path}: {len(table)} combination(s), up to {sum(most.sessions)} session(s) on "
             f"{len(most.sessions)} occasion(s)" + (f", {dates[0][:16]} to {dates[-1][:16]}" if dates else ""),
             f"each judged at alpha {gate.combination_alpha(alpha, len(table)):.2g} ({alpha:g} over {len(table)}) "
             "before Holm's step-down; "
             + (f"spread within an occasion {prior.sigma:.1%} pooled; " if prior else "")
             + f"drift between occasions {drift.sigma:.1%} "
             + (f"(measured on {drift.measured_df} contrast(s), moderated towards the assumed "
                f"{stored.ASSUMED_DRIFT_SIGMA:.0%})" if drift.measured_df else "(assumed: record another occasion)")
             + (f"; slope on the yardstick {slope.beta:.2f} pooled over {slope.sessions} session(s)"
                if slope.sessions else "")]
    width = max([len(r.key) for r in table] + [11])
    head = (f"{'combination':<{width}}  {'sessions':>10}  {'images/sec':>10}  {'slope':>5}  {'spread':>6}  "
            f"{'MDS new occasion':>16}  {'MDS within hour':>15}  threshold")
    lines += [head, "-" * len(head)]
    for r in table:
        lines.append(f"{r.key:<{width}}  {'+'.join(map(str, r.sessions)):>10}  {r.images_per_sec:10.4g}  "
                     f"{'raw' if r.slope is None else f'{r.slope:.2f}':>5}  {_pct(r.spread):>6}  "
                     f"{_pct(r.mds_new_occasion, r.weak):>16}  {_pct(r.mds_within_hour):>15}  {r.threshold:.0%}")
    if any(r.weak for r in table):
        lines.append("MDS!: above the threshold (or unknown); a drop of the threshold's size usually passes there "
                     "(record sessions on more occasions, or gate it in paired mode: hpcnn-perf compare)")
    return lines
