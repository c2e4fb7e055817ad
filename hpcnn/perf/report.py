"""The end-of-session table: every combination, baseline, current, ratio, interval, MDS, verdict."""

from __future__ import annotations

from typing import Callable, Dict, List, Optional, Tuple

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
        extra = "; ".join(x for x in (note, v.evidence, v.note) if x)  # v.note: why the gate is weak there
        lines.append(f"{key:<{width}}  {v.baseline_median:9.2f}  {v.current_median:9.2f}  {v.ratio:6.3f}  "
                     f"{ci:>15}  {_mds(v):>7}  {v.verdict} ({extra})")
    if weak:
        lines.append("MDS!: the minimum detectable slowdown is above the threshold; a drop of the threshold's size "
                     "usually passes there (record more sessions, or use paired mode)")
    return lines


def investigate_commands(key: str, good: Optional[str], bad: Optional[str], matrix: str = "smoke"
                         ) -> Dict[str, str]:
    """The two commands that say which commit (bisect) and which stage (explain) made ``key`` slower,
    under the questions they answer ("which commit", "which stage").

    ``good`` is a revision measured at the old speed (a baseline session's commit), ``bad`` the slower one;
    an unknown revision is left as a placeholder to fill in.
    """
    good, bad = good or "GOOD_REV", bad or "HEAD"
    only = f"--only={key}" + ("" if matrix == "smoke" else f" --perf-matrix={matrix}")
    return {"which commit": f"hpcnn-perf bisect --good={good} --bad={bad} {only}",
            "which stage": f"hpcnn-perf explain --baseline={good} --candidate={bad} {only}"}


def format_markdown(rows: List[Row], title: str, reproduce: Callable[[str], str],
                    investigate: Optional[Callable[[str], Dict[str, str]]] = None) -> str:
    """A merge-request comment: the verdict first, a row per combination, then how to reproduce each failure.

    ``reproduce(key)`` is the one-line command that re-runs combination ``key`` locally; ``investigate(key)``,
    if given, the commands of ``investigate_commands`` listed under it.
    """
    failed = [key for key, v, _ in rows if v is not None and v.failed]
    judged = sum(v is not None for _, v, _ in rows)
    if failed:
        head = f"## hpcnn perf gate: FAILED: {len(failed)} of {judged} combination(s) slower"
    else:
        head = f"## hpcnn perf gate: passed ({judged} combination(s) judged, none slower)"
    lines = [head, "", title, "", "| combination | baseline | current | ratio [95% CI] | MDS | verdict |",
             "| --- | ---: | ---: | --- | ---: | --- |"]
    for key, v, note in rows:
        if v is None:
            lines.append(f"| `{key}` | - | - | - | - | {note} |")
            continue
        verdict = (f"**{v.verdict}**" if v.failed else v.verdict) + (f" ({v.note})" if v.note else "")
        lines.append(f"| `{key}` | {v.baseline_median:.2f} | {v.current_median:.2f} | {v.ratio:.3f} "
                     f"[{v.ci_low:.3f}, {v.ci_high:.3f}] | {_mds(v)} | {verdict} |")
    if any(v is not None and v.weak for _, v, _ in rows):
        lines += ["", "MDS marked `!`: the minimum detectable slowdown is above the threshold there; a drop of the "
                      "threshold's size usually passes (record more sessions, or use paired mode)."]
    if failed:
        lines += ["", "### Reproduce locally", ""]
        for key in failed:
            lines.append(f"- `{key}`: `{reproduce(key)}`")
            for what, command in (investigate(key) if investigate else {}).items():
                lines.append(f"  - {what}: `{command}`")
    return "\n".join(lines) + "\n"
