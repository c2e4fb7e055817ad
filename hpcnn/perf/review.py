"""``hpcnn-perf review``: what a baselines file lets the stored gate see, per combination.

Before trusting (or committing) a runner's baselines, its maintainer wants the
figures the gate will judge with: how many sessions on how many occasions, how
far each combination follows the runner's speed, the spread between sessions,
and the minimum detectable slowdown for a session on a new occasion (as CI's
are) and within the hour of the newest one. These are the figures ``save``
derives and the gate computes, read from the file and nothing else.

The review also backtests the file on its own history: every recorded session
of unchanged code is judged, as a CI session on a new occasion would be,
against the file without the occasion it belongs to (``backtest``). A session
that fails there is a false failure the gate's drift estimate let through,
unless its confirmation clears it: the gate measures a failed combination again
a minute later, and the occasion's next session, recorded about a minute after,
stands in for that re-measurement (the occasion's last session has none, so its
failures stand).
"""

from __future__ import annotations

import dataclasses
import datetime
import math
import statistics
from typing import Callable, Dict, List, Optional, Sequence

from hpcnn.perf import gate, stored
from hpcnn.perf.baselines import Baselines


@dataclasses.dataclass(frozen=True)
class Row:
    """One combination: sessions per occasion, images/sec (median of raw session medians), its slope on the
    yardstick within an occasion and for a session on a new occasion (None: judged raw), the spread of log
    session level within an occasion, the MDS of a session on a new occasion, within the hour of the newest
    one, and on a new occasion of a machine the file does not hold (an ephemeral runner's; None: unknown), and
    its threshold."""

    key: str
    sessions: List[int]
    images_per_sec: float
    slope: Optional[float]
    occasion_slope: Optional[float]
    spread: Optional[float]
    mds_new_occasion: Optional[float]
    mds_within_hour: Optional[float]
    mds_other_machine: Optional[float]
    threshold: float

    def _weak(self, mds: Optional[float]) -> bool:
        """``mds`` is above the threshold (or unknown): a drop of the threshold's size usually passes."""
        return mds is None or mds > self.threshold

    @property
    def weak(self) -> bool:
        """The MDS on a new occasion is weak (``_weak``)."""
        return self._weak(self.mds_new_occasion)

    @property
    def weak_on_another_machine(self) -> bool:
        """The MDS on a machine the file does not hold is weak (``_weak``)."""
        return self._weak(self.mds_other_machine)


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
                       b.slope(key).beta if reference else None,
                       b.slope(key, new_occasion=True).beta if reference else None, noise.sigma if noise else None,
                       b.next_session_mds(key, each), b.next_session_mds(key, each, new_occasion=False),
                       b.next_session_mds(key, each, other_machine=True),
                       b.combinations[key].get("threshold", gate.STORED_THRESHOLD)))
    return out


@dataclasses.dataclass(frozen=True)
class HeldOut:
    """One recorded occasion judged against the file without it: when its first session ran, each of its
    sessions' verdicts ({combination: verdict}) at the combination's share of the family-wise alpha, after
    Holm's step-down, and after confirmation (``confirmed``: each failure after Holm judged again on the
    occasion's next session at ``gate.CONFIRM_ALPHA``, ``gate.confirm``; the gate's decision)."""

    occasion: int
    first: str
    alone: List[Dict[str, gate.Verdict]]
    family: List[Dict[str, gate.Verdict]]
    confirmed: List[Dict[str, gate.Verdict]]

    @property
    def failed_alone(self) -> int:
        """Sessions with a combination failed at its own level."""
        return _sessions_failing(self.alone)

    @property
    def failed(self) -> int:
        """Sessions with a combination failed after Holm's step-down, on their first measurement."""
        return _sessions_failing(self.family)

    @property
    def failed_confirmed(self) -> int:
        """Sessions with a failure that its confirmation did not clear (the gate's decision)."""
        return _sessions_failing(self.confirmed)

    @property
    def ratios(self) -> List[float]:
        return [v.ratio for s in self.alone for v in s.values()]


def _sessions_failing(sessions: Sequence[Dict[str, gate.Verdict]]) -> int:
    """How many of ``sessions`` ({combination: verdict} each) have a failed combination."""
    return sum(any(v.failed for v in s.values()) for s in sessions)


def backtest(b: Baselines, alpha: float = gate.DEFAULT_ALPHA) -> List[HeldOut]:
    """Each occasion of ``b`` held out in turn: its sessions judged, as CI sessions on a new occasion, against
    the others. Empty where the file holds one occasion.

    The i-th session of each combination in an occasion is one pytest session (every session records each
    combination once), so they are judged together: each combination at its share of ``alpha`` over those the
    session judges, then Holm's step-down, then each failure confirmed on the combination's next session of
    the occasion, as the gate re-measures it (``HeldOut.confirmed``). A combination with no session outside the
    occasion is not judged.
    """
    keys = sorted(b.combinations)
    sessions = {k: b.combinations[k].get("sessions", []) for k in keys}
    occasion = b.file_occasions()
    count = 1 + max((max(o) for o in occasion.values() if o), default=-1)
    # after every session of the file, so that every held-out occasion is another than the rest, as by its dates
    dates = [stored.parse_date(s.get("date")) for k in keys for s in sessions[k]]
    now = max([t for t in dates if t is not None] or [datetime.datetime.now(datetime.timezone.utc)]) + \
        datetime.timedelta(hours=stored.OCCASION_GAP_HOURS, seconds=1)
    out = []
    for g in (range(count) if count > 1 else ()):
        held = {k: [s for s, o in zip(sessions[k], occasion[k]) if o == g] for k in keys}
        rest = Baselines(b.profile, {k: {**b.combinations[k], "sessions": [
            s for s, o in zip(sessions[k], occasion[k]) if o != g]} for k in keys})
        alone, family, confirmed = [], [], []

        def judge(key: str, level: float, i: int) -> gate.Verdict:
            s = held[key][i]
            rate = (s.get("yardstick") or {}).get("rate")
            return rest.judge(key, s["samples"], [rate] if rate else [], level, now=now, machine=s.get("machine"))

        for i in range(max(len(h) for h in held.values())):
            present = [k for k in keys if i < len(held[k]) and rest.combinations[k]["sessions"]]
            if not present:
                continue
            each = {k: judge(k, gate.combination_alpha(alpha, len(present)), i) for k in present}
            alone.append(each)
            family.append(gate.family(each, {k: v.p_slower for k, v in each.items()},
                                      lambda k, level, i=i: judge(k, level, i), alpha))
            confirmed.append({k: _confirmed(v, held[k], i, lambda k=k, i=i: judge(k, gate.CONFIRM_ALPHA, i + 1))
                              for k, v in family[-1].items()})
        first = min((s["date"] for h in held.values() for s in h if s.get("date")), default="")
        out.append(HeldOut(g, first, alone, family, confirmed))
    return out


def _confirmed(verdict: gate.Verdict, sessions: Sequence[dict], i: int,
               again: Callable[[], gate.Verdict]) -> gate.Verdict:
    """``verdict`` of a combination's i-th session of an occasion after confirmation: a failure judged again on
    its next session (``again()``), the seconds between their dates as the pause; a failure in the occasion's
    last session stands, as one the gate could not re-measure."""
    if not verdict.failed or i + 1 >= len(sessions):
        return verdict
    first, later = (stored.parse_date(sessions[j].get("date")) for j in (i, i + 1))
    return gate.confirm(verdict, again(), (later - first).total_seconds() if first and later else 0.0)


def backtest_line(held: Sequence[HeldOut]) -> str:
    """The backtest in one line: how many of the file's unchanged sessions would have failed on their first
    measurement, and how many of those once confirmed."""
    if not held:
        return ("backtest: one occasion recorded, none to judge against the others (record another occasion, "
                "an hour or more later)")
    failed, total = sum(h.failed for h in held), sum(len(h.alone) for h in held)
    confirmed = sum(h.failed_confirmed for h in held)
    line = (f"backtest: {failed} of {total} unchanged session(s) on {len(held)} occasion(s) would have failed the "
            "gate, each judged against the file without its occasion")
    if not failed:
        return line
    line += f", {confirmed} of them once confirmed on the occasion's next session"
    if not confirmed:
        return line + ": slow spells of the runner, which the gate's own re-measurement clears too"
    return line + (": unless the code changed between those occasions (their sessions' commits), the drift between "
                   "this runner's occasions is larger than the file measures; record sessions on more occasions "
                   "before gating with it")


def format_backtest(held: Sequence[HeldOut]) -> List[str]:
    """The backtest for the terminal: a row per held-out occasion, then the total (``backtest_line``)."""
    if not held:
        return [backtest_line(held)]
    lines = ["backtest: each occasion's sessions of unchanged code judged, as a CI session on a new occasion, "
             "against the file without that occasion",
             f"{'occasion':>8}  {'first session':<16}  {'sessions':>8}  {'failed':>6}  {'failed alone':>12}  "
             f"{'confirmed':>9}  {'ratios':>11}  MDS median"]
    for h in held:
        mds = [v.mds for s in h.alone for v in s.values() if v.mds is not None]
        lines.append(f"{h.occasion + 1:>8}  {h.first[:16]:<16}  {len(h.alone):>8}  {h.failed:>6}  "
                     f"{h.failed_alone:>12}  {h.failed_confirmed:>9}  {min(h.ratios):.3f}-{max(h.ratios):.3f}  "
                     f"{_pct(statistics.median(mds)) if mds else '?'}")
    return lines + [backtest_line(held)]


def _slopes(r: Row) -> str:
    """A row's slope within an occasion, then the one for a new occasion where it differs ("raw": none)."""
    if r.slope is None:
        return "raw"
    return f"{r.slope:.2f}" + (f"/{r.occasion_slope:.2f}" if r.occasion_slope != r.slope else "")


def _pct(x: Optional[float], weak: bool = False) -> str:
    return ("?" if x is None else f"{x:.1%}") + ("!" if weak else "")


def format_review(b: Baselines, path: str, alpha: float = gate.DEFAULT_ALPHA) -> List[str]:
    """The review for the terminal: what the file holds, the figures pooled over its combinations, then a
    fixed-width row per combination; an MDS marked ! is above its threshold."""
    table = rows(b, alpha)
    dates = sorted(s["date"] for c in b.combinations.values() for s in c["sessions"] if s.get("date"))
    most = max(table, key=lambda r: sum(r.sessions))
    drift, prior, slope, extra, other = b.drift(), b.prior(), b.slope(), b.extra(), b.other_machine()
    lines = [f"{path}: {len(table)} combination(s), up to {sum(most.sessions)} session(s) on "
             f"{len(most.sessions)} occasion(s)" + (f", {dates[0][:16]} to {dates[-1][:16]}" if dates else ""),
             f"each judged at alpha {gate.combination_alpha(alpha, len(table)):.2g} ({alpha:g} over {len(table)}) "
             "before Holm's step-down; "
             + (f"spread within an occasion {prior.sigma:.1%} pooled; " if prior else "")
             + f"drift between occasions {drift.sigma:.1%} "
             + (f"(measured on {drift.measured_df} contrast(s), moderated towards the assumed "
                f"{stored.ASSUMED_DRIFT_SIGMA:.0%})" if drift.measured_df else "(assumed: record another occasion)")
             + (f"; slope on the yardstick {slope.beta:.2f} pooled over {slope.sessions} session(s)"
                if slope.sessions else "")
             + (f", {extra.beta:+.2f} for a new occasion (measured on {extra.occasions} occasions, moderated "
                f"towards none; one occasion's own strays by {math.sqrt(extra.spread):.2f})"
                if extra.occasions else ""),
             f"sessions on {other.machines} machine(s) (unnamed sessions count as one); a machine the file does not "
             f"hold is judged with machines {other.spread.sigma:.1%} apart per workload "
             + (f"(measured on {other.spread.measured_df} contrast(s), moderated towards the assumed "
                f"{stored.ASSUMED_MACHINE_SIGMA:.0%})" if other.spread.measured_df
                else "(assumed: record sessions on another machine of this profile)")]
    width = max([len(r.key) for r in table] + [11])
    head = (f"{'combination':<{width}}  {'sessions':>10}  {'images/sec':>10}  {'slope':>9}  {'spread':>6}  "
            f"{'MDS new occasion':>16}  {'MDS within hour':>15}  {'MDS new machine':>15}  threshold")
    lines += [head, "-" * len(head)]
    for r in table:
        lines.append(f"{r.key:<{width}}  {'+'.join(map(str, r.sessions)):>10}  {r.images_per_sec:10.4g}  "
                     f"{_slopes(r):>9}  {_pct(r.spread):>6}  "
                     f"{_pct(r.mds_new_occasion, r.weak):>16}  {_pct(r.mds_within_hour):>15}  "
                     f"{_pct(r.mds_other_machine, r.weak_on_another_machine):>15}  {r.threshold:.0%}")
    if any(r.weak for r in table):
        lines.append("MDS!: above the threshold (or unknown); a drop of the threshold's size usually passes there "
                     "(record sessions on more occasions, or gate it in paired mode: hpcnn-perf compare)")
    return lines
