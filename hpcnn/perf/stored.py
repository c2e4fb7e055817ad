"""Stored mode: this session against the recorded sessions of a baselines file.

A combination's baseline holds the rounds of several sessions (separate
processes, spread over time). On shared runners whole sessions drift by 10-35%,
so the rounds of one session are not independent draws and a session's own
spread says nothing of the next one. The unit of evidence is therefore the
session median: on the log scale the recorded session medians give a level and
a between-session spread, and an unchanged session falls inside the t prediction
interval around that level.

A combination's spread rests on few sessions, so it is moderated towards the
profile's pooled spread (every combination's sessions), as limma moderates
per-gene variances: the pooled figure counts as ``PRIOR_DF`` degrees of freedom.
With a single recorded session and nothing to pool, the gate says that it cannot
tell drift from a regression and fails only beyond ``gate.WIDE_BOUND``.

Most of that drift is the runner's speed, shared by every workload of a session,
so where the sessions timed ``hpcnn.perf.yardstick`` beside their rounds the
gate judges throughput on the yardstick (``on_yardstick``): each session's
images/sec times a reference rate over its own. On 16 sessions of one commit,
half of them beside a process burning a core, that cut the spread of log session
medians from 0.22-0.31 to 0.02-0.09 (quiet sessions alone: 0.04-0.06 to 0.02-0.05).

Sessions recorded within an hour share more than the yardstick corrects for (the
same VM, host and neighbours): a file recorded in one sitting holds no drift
between days, and a 10% gate built on it failed 2 of 5 unchanged sessions the
next day. Sessions are therefore grouped into *occasions* (each within
``OCCASION_GAP_HOURS`` of the one before); the spread between sessions is
measured within occasions, and a session on a new occasion is judged with an
occasion term added: its spread (``Drift``) pooled over the file's combinations
where the file holds two or more occasions, moderated towards ``ASSUMED_DRIFT``,
the between-day spread measured on our own runners, which stands alone until a
file holds a second occasion.

The yardstick is not every workload: within one day on a 2-core Zen 3 runner,
log throughput moved 0.57 times as far as the log yardstick rate (84 sessions;
0.2-0.8 per combination and day), and dividing by the whole rate read unchanged
sessions up to 20% fast. The correction therefore raises the rate ratio to a
``Slope`` measured within the file's occasions and moderated towards
``ASSUMED_SLOPE``; the slope's uncertainty, for the combination judged, enters
the prediction interval in proportion to how far this session's runner speed
lies from the speeds of the sessions it is compared with (``Runner``).

Workloads follow the runner differently: on the 2-core Zen 4 runner, within the
occasions of its file, lenet's throughput moved 0.87 times as far as the log
yardstick rate and alexnet's not at all (9 sessions each; pooled slope 0.31), so
one pooled slope left lenet a 5% spread between sessions that its own slope cuts to
1%. Each combination therefore gets its own slope (``combination_slope``): its
sessions' fit combined with the pooled slope by precision, so that a combination
whose sessions saw the runner at one speed keeps the pooled slope, and the degrees
of freedom its own fit spends (``Slope.fitted``) leave its spread's count.

Between occasions throughput follows the yardstick further than within one: the
Zen 4 runner's slow mornings slowed its models more than its within-occasion
slopes say, and the Zen 3 runner at 0.55x read trivial-independent 30% below its
baseline. A session on a new occasion is therefore corrected at its combination's
slope plus an ``Extra`` measured across the file's occasions (``occasion_extra``:
each session against the other occasions, as the gate judges a new one); the
spread within occasions and the drift between them are measured at that slope too.
A session within the hour of the newest occasion keeps the slope within one.

That extra slope is not one figure for every occasion: measured on each occasion
against the others, it scattered by 0.08 over the Zen 3 file's three occasions and
0.17 over the Zen 4 file's eight, where the error of its mean was 0.03 and 0.06. A
new occasion is one more draw, so the slope's variance for it holds that scatter
too (``Extra.spread``), and the interval widens with the runner's distance from
its recorded speeds. Judged with the error of the mean alone, a Zen 3 file that
held another VM's sessions failed 22 of 37 unchanged sessions of slow spells; with
the scatter, 9.

A profile names a kind of machine, and two machines of one kind differ per
workload: on a Zen 3 VM the file had not seen, the trivial models ran 15-26% fast
and tiny_resnet 14% slow against what the file predicted at that runner speed,
where the file's three occasions on one VM drifted 3.8% apart. Sessions name their
machine (``profile.machine_id``); a session on a machine the file holds is judged
against that machine's sessions alone, and one on a machine it does not hold (or
against a file whose sessions name none) is judged on a new occasion with a
machine term added (``pooled_machines``): the spread of a machine's offset per
combination, measured where the file holds two or more machines and moderated
towards ``ASSUMED_MACHINE``, which stands alone until then.
"""

from __future__ import annotations

import dataclasses
import datetime
import math
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np
from scipy import stats

from hpcnn.perf import gate

PRIOR_DF = 4
# Sessions closer than this ran under the same conditions. On the Zen 3 runner, sessions within 83 minutes of
# a recording caught a planted 25% in 18-20 of 20 where the MDS said 19-24%; 2.5-4 hours after one, judged
# within its occasion, an MDS of 23-25% caught it in 4-6 of 22 and unchanged sessions read up to 26% fast (the
# gate with the whole yardstick rate failed one of those 22 unchanged sessions): beyond an hour, drift counts
OCCASION_GAP_HOURS = 1.0
# The spread of log session level between occasions beyond the spread within one, on the yardstick, and the
# number of independent day-to-day contrasts it rests on (set from the measurements named in baselines/README.md)
ASSUMED_DRIFT_SIGMA = 0.05
ASSUMED_DRIFT_DF = 12
# How far beyond the range of runner speeds its baselines saw a session's yardstick still corrects: a runner far
# slower than ever recorded slows the models less than the yardstick, so a correction from 0.6x read unchanged
# sessions up to 20% fast, and a planted 10% slowdown as a 14% "improvement"
RUNNER_MARGIN = 0.10
# How far log throughput follows the log yardstick rate, before a file measures its own (a normal prior): 0.57
# (se 0.03) pooled within days over 84 sessions of the Zen 3 runner, 0.47 within the occasions of its shipped
# file, 0.83 over 16 sessions of which half ran beside a process burning a core; and how far one combination's
# slope strays from the pooled one (0.2-0.8 per combination and day, each from 6-10 sessions)
ASSUMED_SLOPE = 0.7
ASSUMED_SLOPE_SD = 0.2
SLOPE_SPREAD = 0.15
# The spread of log session levels about that fit within an occasion, for a file of few sessions (0.02-0.09 on
# the yardstick over the sessions named in baselines/README.md): worth PRIOR_DF degrees of freedom
RESIDUAL_SD = 0.05
# The steepest slope a fit or its correction across occasions may reach (the shallowest is 0: none)
MAX_SLOPE = 1.5
# Between occasions throughput follows the yardstick further than within one: on the Zen 4 runner's eight
# occasions a session judged against the other occasions was predicted best at its within-occasion slope plus
# 0.26 (0.19-0.29 with any one occasion left out; 0.21 over the Zen 3 runner's three), most of it from its slow
# days. That extra slope (``Extra``) is measured where a file holds OCCASION_SLOPE_OCCASIONS occasions or more,
# each occasion one cluster of evidence, and moderated towards none with this spread; below that it is none
OCCASION_SLOPE_SD = 0.15
OCCASION_SLOPE_OCCASIONS = 3
# The spread of one machine's offset (log, per combination, beyond the drift between occasions) among machines
# of one profile, before a file holds two machines, and the number of machine-combination contrasts it rests on.
# Two Zen 3 VMs judged against a file recorded on a third (baselines/README.md): the six combinations' median
# log-ratios had a mean square of 0.0231 on the VM of 2026-12-01 and 0.0106 on that of 2026-12-03, pooled
# 0.0169, twice the variance of one machine's offset (0.092 squared). 0.11 on 6 contrasts, from the first VM
# alone, judged the second out of sample first: it failed none of its 20 unchanged sessions
ASSUMED_MACHINE_SIGMA = 0.092
ASSUMED_MACHINE_DF = 12

Sessions = Sequence[Sequence[float]]  # per recorded session, its rounds' images/sec


@dataclasses.dataclass(frozen=True)
class Noise:
    """The between-session standard deviation of log session medians, and its degrees of freedom."""

    sigma: float
    df: float


@dataclasses.dataclass(frozen=True)
class Drift:
    """The standard deviation of a whole occasion's offset (log scale), its degrees of freedom, and how many of
    the file's occasion contrasts measured it (0: ``ASSUMED_DRIFT_SIGMA`` alone)."""

    sigma: float
    df: float
    measured_df: int = 0


ASSUMED_DRIFT = Drift(ASSUMED_DRIFT_SIGMA, ASSUMED_DRIFT_DF)
ASSUMED_MACHINE = Drift(ASSUMED_MACHINE_SIGMA, ASSUMED_MACHINE_DF)


@dataclasses.dataclass(frozen=True)
class OtherMachine:
    """A session on a machine the file holds no session of: the spread of a machine's offset (``spread``, a
    ``Drift``: measured or assumed) and how many machines the file's sessions ran on (1 where they name none)."""

    spread: Drift
    machines: int = 1

    @property
    def var(self) -> float:
        """The variance of the new machine's offset less the mean of the file's machines'."""
        return self.spread.sigma ** 2 * (1 + 1 / self.machines)


@dataclasses.dataclass(frozen=True)
class Slope:
    """How far log throughput follows the log yardstick rate within an occasion (``beta``), the variance of one
    combination's slope about it (pooled: the estimate's error plus ``SLOPE_SPREAD`` squared), how many
    recorded sessions measured it (0: ``ASSUMED_SLOPE`` alone), and the degrees of freedom a combination's own
    sessions spent on it (``combination_slope``: its own fit's weight; 0 for the pooled slope)."""

    beta: float
    var: float
    sessions: int = 0
    fitted: float = 0.0


ASSUMED = Slope(ASSUMED_SLOPE, ASSUMED_SLOPE_SD ** 2 + SLOPE_SPREAD ** 2)


@dataclasses.dataclass(frozen=True)
class Extra:
    """How much further than its slope within an occasion a combination's throughput follows the yardstick for
    a session on a new occasion (``beta``, pooled over the file's combinations), its variance, on how many
    occasions it was measured (0: none measured, and none added), and the variance of one occasion's own extra
    slope about ``beta`` (``spread``): a new occasion is one more draw of it."""

    beta: float
    var: float
    occasions: int = 0
    spread: float = 0.0


NO_EXTRA = Extra(0.0, 0.0)


@dataclasses.dataclass(frozen=True)
class Runner:
    """Where a session stands on the yardstick: its runner speed and each recorded session's (rates over one
    reference rate, recorded oldest first), and how far throughput follows that speed."""

    speed: float
    recorded: Tuple[float, ...]
    slope: Slope

    @property
    def seen(self) -> Tuple[float, float]:
        """The slowest and fastest recorded speed."""
        return min(self.recorded), max(self.recorded)


def occasions(dates: Sequence[Optional[str]], gap_hours: float = OCCASION_GAP_HOURS) -> List[int]:
    """The occasion of each session (dates ISO, oldest first): a new one after a gap over ``gap_hours``.

    A session without a date joins the one before it (the conservative reading: no drift measured).
    """
    out: List[int] = []
    last = None
    for d in dates:
        t = parse_date(d)
        new = bool(out) and t is not None and last is not None and (t - last).total_seconds() > gap_hours * 3600
        out.append(0 if not out else out[-1] + new)
        last = t if t is not None else last
    return out


def on_new_occasion(dates: Sequence[Optional[str]], now: datetime.datetime,
                    gap_hours: float = OCCASION_GAP_HOURS) -> bool:
    """Whether a session at ``now`` runs on another occasion than the newest recorded one (True if undated)."""
    newest = max((t for t in map(parse_date, dates) if t is not None), default=None)
    return newest is None or (now - newest).total_seconds() > gap_hours * 3600


def parse_date(date: Optional[str]) -> Optional[datetime.datetime]:
    """A session's ISO date as an aware datetime (UTC where it names no zone); None for no date."""
    if not date:
        return None
    t = datetime.datetime.fromisoformat(date)
    return t if t.tzinfo else t.replace(tzinfo=datetime.timezone.utc)


def on_yardstick(samples: Sequence[float], rate: float, reference: float, slope: float = 1.0) -> List[float]:
    """``samples`` (images/sec) as they would read with the yardstick at ``reference`` instead of ``rate``, where
    throughput follows the yardstick's rate to the power ``slope``."""
    if rate <= 0 or reference <= 0:
        raise ValueError(f"on_yardstick() needs positive rates, got rate={rate} reference={reference}")
    return [x * (reference / rate) ** slope for x in samples]


@dataclasses.dataclass(frozen=True)
class SlopeSums:
    """What a slope fit needs of some sessions: sums of squares and products of log session level and log
    yardstick rate about their occasions' means, how many sessions, and in how many occasions of two or more.
    Sums add, so a fit pooled over every combination but one is the total less that one (``Baselines.slope``)."""

    sxx: float = 0.0
    sxy: float = 0.0
    syy: float = 0.0
    n: int = 0
    groups: int = 0

    def __add__(self, other: "SlopeSums") -> "SlopeSums":
        return SlopeSums(self.sxx + other.sxx, self.sxy + other.sxy, self.syy + other.syy, self.n + other.n,
                         self.groups + other.groups)

    def __sub__(self, other: "SlopeSums") -> "SlopeSums":
        return SlopeSums(self.sxx - other.sxx, self.sxy - other.sxy, self.syy - other.syy, self.n - other.n,
                         self.groups - other.groups)


def slope_sums(levels_: Sequence[float], speeds: Sequence[float], occasion: Sequence[int]) -> SlopeSums:
    """One combination's ``SlopeSums``: its log session levels (``levels``) and yardstick rates, centred within
    each occasion that holds two or more sessions."""
    y, z, g = np.asarray(levels_, float), np.log(np.asarray(speeds, float)), np.asarray(occasion)
    out = SlopeSums()
    for o in np.unique(g):
        if np.sum(g == o) > 1:
            x, w = z[g == o] - z[g == o].mean(), y[g == o] - y[g == o].mean()
            out += SlopeSums(float(x @ x), float(x @ w), float(w @ w), len(x), 1)
    return out


def pooled_slope(every_levels: Iterable[Sequence[float]], every_speeds: Iterable[Sequence[float]],
                 every_occasion: Iterable[Sequence[int]]) -> Slope:
    """The slope of log session level (``levels`` of raw rounds) on log yardstick rate within each combination's
    occasions, pooled over combinations and combined with the ``ASSUMED_SLOPE`` prior by precision; the prior
    alone where no occasion holds two sessions at different rates."""
    return slope_of(sum(map(slope_sums, every_levels, every_speeds, every_occasion), SlopeSums()))


def slope_of(sums: SlopeSums) -> Slope:
    """``pooled_slope`` of sessions summed in ``sums``."""
    fit = _fit_slope(sums, ASSUMED_SLOPE, ASSUMED_SLOPE_SD ** 2)
    if fit is None:
        return ASSUMED
    beta, var, n, _ = fit
    return Slope(beta, var + SLOPE_SPREAD ** 2, n)


def combination_slope(pooled: Slope, levels_: Sequence[float], speeds: Sequence[float],
                      occasion: Sequence[int]) -> Slope:
    """One combination's slope: its own sessions' fit within its occasions combined by precision with
    ``pooled`` (whose variance is the spread of one combination's slope about it); ``pooled`` itself where its
    occasions hold no two sessions at different rates. ``fitted`` is the weight of its own fit."""
    fit = _fit_slope(slope_sums(levels_, speeds, occasion), pooled.beta, pooled.var)
    if fit is None:
        return pooled
    beta, var, n, weight = fit
    return Slope(beta, var, n, weight)


def _fit_slope(sums: SlopeSums, prior_beta: float, prior_var: float) -> Optional[Tuple[float, float, int, float]]:
    """The least-squares slope of level on log speed about each occasion's means, its residual variance
    moderated towards ``RESIDUAL_SD``, combined with a normal prior: (slope clipped to 0-MAX_SLOPE, its variance, the
    sessions it rests on, the weight of the data in it); None without an occasion of two sessions apart."""
    df = sums.n - sums.groups - 1
    if sums.sxx <= 0 or df <= 0:
        return None
    own = sums.sxy / sums.sxx
    residual = (PRIOR_DF * RESIDUAL_SD ** 2 + max(0.0, sums.syy - own * sums.sxy)) / (PRIOR_DF + df)
    own_var = residual / sums.sxx
    var = 1 / (1 / prior_var + 1 / own_var)
    beta = var * (prior_beta / prior_var + own / own_var)
    return float(np.clip(beta, 0.0, MAX_SLOPE)), var, sums.n, var / own_var


def occasion_sums(levels_: Sequence[float], speeds: Sequence[float], occasion: Sequence[int],
                   beta: float) -> Dict[int, Tuple[float, float]]:
    """What one combination's sessions say of the ``Extra`` slope, per occasion: each session's log level and
    log yardstick rate less the mean of the other occasions' means (dy, dz: the gap a session on a new occasion
    is judged across), and for the occasion the sums of dz times dy less ``beta`` (the combination's slope
    within an occasion) times dz, and of dz squared. Empty for a combination on one occasion."""
    y, z, g = np.asarray(levels_, float), np.log(np.asarray(speeds, float)), np.asarray(occasion)
    ids = np.unique(g)
    if len(ids) < 2:
        return {}
    means = {o: (y[g == o].mean(), z[g == o].mean()) for o in ids}
    out = {}
    for o in ids:
        others = np.array([means[p] for p in ids if p != o]).mean(axis=0)
        dy, dz = y[g == o] - others[0], z[g == o] - others[1]
        out[int(o)] = (float(dz @ (dy - beta * dz)), float(dz @ dz))
    return out


def occasion_extra(sums: Dict[int, Tuple[float, float]]) -> Extra:
    """The ``Extra`` slope from ``occasion_sums`` added up per occasion over a file's combinations: their
    least-squares slope, with a variance that counts each occasion once (its sessions share its offset: the
    cluster-robust sandwich), combined by precision with none at ``OCCASION_SLOPE_SD``. ``NO_EXTRA`` on fewer
    than ``OCCASION_SLOPE_OCCASIONS`` occasions, or where the runner's speed never moved between them.

    The sandwich is the error of the mean over the file's occasions; each occasion's own slope (its sums'
    ratio) scatters about that mean, and the ``spread`` is that scatter's variance, each occasion weighted by
    its squared speed gaps, over k - 1. It is not netted of the rounds' noise or of the occasion's offset (the
    drift term holds that too): the conservative reading, for a figure resting on a handful of occasions."""
    num, den = (np.array([sums[o][i] for o in sorted(sums)]) for i in (0, 1))
    k = len(num)
    if k < OCCASION_SLOPE_OCCASIONS or den.sum() <= 0:
        return NO_EXTRA
    d = num.sum() / den.sum()
    var = float(np.sum((num - d * den) ** 2) / den.sum() ** 2 * k / (k - 1))
    if var <= 0:
        return NO_EXTRA
    prior = OCCASION_SLOPE_SD ** 2
    moderated = 1 / (1 / prior + 1 / var)
    apart = den > 0
    spread = float(np.sum(den[apart] * (num[apart] / den[apart] - d) ** 2) / den.sum() * k / (k - 1))
    return Extra(float(moderated * d / var), moderated, k, spread)


def across_occasions(slope: Slope, extra: Extra) -> Slope:
    """``slope`` (within an occasion) as it holds for a session on a new occasion: steeper by ``extra``, and
    less sure by the extra slope's error and by how far one occasion's own strays (``Extra.spread``)."""
    if not extra.occasions:
        return slope
    return dataclasses.replace(slope, beta=float(np.clip(slope.beta + extra.beta, 0.0, MAX_SLOPE)),
                               var=slope.var + extra.var + extra.spread)


def levels(sessions: Sessions) -> np.ndarray:
    """The log of each session's median throughput."""
    return np.log([float(np.median(s)) for s in sessions])


def _within(sessions: Sessions, occasion: Optional[Sequence[int]], fitted: float = 0.0) -> Tuple[float, float]:
    """The sum of squares of log session levels about their occasion's mean, and its degrees of freedom less
    ``fitted``, those the sessions spent on their combination's own slope (``Slope.fitted``)."""
    x = levels(sessions)
    groups = np.asarray(occasion if occasion is not None else [0] * len(x))
    ss = sum(float(np.sum((x[groups == g] - x[groups == g].mean()) ** 2)) for g in np.unique(groups))
    return ss, len(x) - len(np.unique(groups)) - fitted


def _occasion_means(sessions: Sessions, occasion: Optional[Sequence[int]]) -> Tuple[np.ndarray, np.ndarray]:
    """Per occasion: the mean log session level and the number of sessions."""
    x = levels(sessions)
    groups = np.asarray(occasion if occasion is not None else [0] * len(x))
    ids = np.unique(groups)
    return np.array([x[groups == g].mean() for g in ids]), np.array([np.sum(groups == g) for g in ids])


def pooled_noise(every_combination: Iterable[Sessions],
                 every_occasion: Optional[Iterable[Sequence[int]]] = None,
                 every_fitted: Optional[Iterable[float]] = None) -> Optional[Noise]:
    """The spread between sessions of one occasion, pooled over combinations; None without 2+ such sessions.

    ``every_occasion``: each combination's session occasions (``occasions``); None: one occasion each.
    ``every_fitted``: the degrees of freedom each spent on its own slope (``Slope.fitted``); None: none.
    """
    ss, df = 0.0, 0.0
    combos = list(every_combination)
    occasions_ = every_occasion if every_occasion is not None else [None] * len(combos)
    for sessions, occasion, fitted in zip(combos, occasions_, every_fitted or [0.0] * len(combos)):
        s, d = _within(sessions, occasion, fitted)
        ss, df = ss + s, df + d
    return Noise(math.sqrt(ss / df), df) if df > 0 else None


def pooled_drift(every_combination: Iterable[Sessions], every_occasion: Iterable[Sequence[int]],
                 within: Optional[Noise]) -> Drift:
    """The spread of occasion offsets: the file's occasion means pooled over combinations, moderated towards
    ``ASSUMED_DRIFT``; the assumption alone where no combination has two occasions.

    Occasion means scatter by the drift plus the within-occasion spread over each occasion's sessions; that
    share (``within``) is taken out before pooling (a random-effects ANOVA, its estimate floored at 0).
    """
    return _between(every_combination, every_occasion, within.sigma ** 2 if within else 0.0, ASSUMED_DRIFT)


def pooled_machines(every_combination: Iterable[Sessions], every_machine: Iterable[Sequence[object]],
                    drift: Drift, within: Optional[Noise]) -> Drift:
    """The spread of a machine's offset: each combination's means over each machine's sessions, pooled over
    combinations, moderated towards ``ASSUMED_MACHINE``; the assumption alone where no combination ran on two
    machines (``every_machine``: each session's machine id, None where it names none, which counts as one).

    A machine's mean scatters also by the drift and the spread within occasions; both are taken out as if each
    session were an occasion of its own, which takes out less than they put there where a machine's sessions
    share occasions: the conservative reading."""
    member = drift.sigma ** 2 + (within.sigma ** 2 if within else 0.0)
    groups = [_numbered(m) for m in every_machine]
    return _between(every_combination, groups, member, ASSUMED_MACHINE)


def _numbered(ids: Sequence[object]) -> List[int]:
    """Ids (any hashable, None included) as group numbers in order of first appearance."""
    seen: Dict[object, int] = {}
    return [seen.setdefault(i, len(seen)) for i in ids]


def _between(every_combination: Iterable[Sessions], every_group: Iterable[Sequence[int]], member_var: float,
             prior: Drift) -> Drift:
    """The spread of group offsets pooled over combinations: the scatter of each combination's group means of
    log session levels, less what ``member_var`` (one session's variance within its group) puts there, floored at
    0 and moderated towards ``prior``, counting each combination's groups less one as its degrees of freedom."""
    excess, df = 0.0, 0
    for sessions, group in zip(every_combination, every_group):
        means, counts = _occasion_means(sessions, group)
        if len(means) >= 2:
            excess += float(np.sum((means - means.mean()) ** 2)) - (len(means) - 1) * member_var * float(
                np.mean(1 / counts))
            df += len(means) - 1
    var = (prior.df * prior.sigma ** 2 + max(0.0, excess)) / (prior.df + df)
    return Drift(math.sqrt(var), prior.df + df, df)


def moderated_noise(sessions: Sessions, prior: Optional[Noise],
                    occasion: Optional[Sequence[int]] = None, fitted: float = 0.0) -> Optional[Noise]:
    """One combination's spread within occasions, its own sessions combined with ``prior``; None if neither
    says anything. ``fitted``: the degrees of freedom its sessions spent on its own slope."""
    own_ss, own_df = _within(sessions, occasion, fitted)
    d0 = min(prior.df, PRIOR_DF) if prior else 0
    if own_df + d0 <= 0:
        return None
    var = (d0 * (prior.sigma ** 2 if prior else 0.0) + own_ss) / (d0 + own_df)
    return Noise(math.sqrt(var), d0 + own_df)


def _prediction_se(sessions: Sessions, noise: Noise, occasion: Optional[Sequence[int]], drift: Optional[Drift],
                   runner: Optional[Runner] = None,
                   other: Optional[OtherMachine] = None) -> Tuple[float, float, float]:
    """The level the next session is judged against (log), the standard error of that session's log-ratio to
    it, and the error's degrees of freedom (Welch-Satterthwaite).

    On a new occasion (``drift`` given) the level is the mean of the occasion means, each occasion one draw of
    the drift. With ``drift`` None the next session shares the newest occasion (a session run within the hour of
    the recording): the level is that occasion's mean, and only the spread within it counts. With ``runner``,
    the slope's variance times the squared distance of the runner's log speed from the same mean of the
    recorded sessions' log speeds is added: the yardstick's correction is surer close to where it was measured.
    With ``other`` (the session runs on a machine the file does not hold; ``drift`` must be given), that
    machine's offset is added too."""
    groups = np.asarray(occasion if occasion is not None else [0] * len(sessions))
    ids = np.unique(groups)
    counts = np.array([np.sum(groups == g) for g in ids])
    if drift:  # every occasion weighs alike, its sessions alike within it
        weights = np.array([1 / (len(ids) * counts[list(ids).index(g)]) for g in groups])
        k = len(ids)
        var_w = noise.sigma ** 2 * (1 + float(np.mean(1 / counts)) / k)
        var_d = drift.sigma ** 2 * (1 + 1 / k)
    else:
        weights = (groups == ids[-1]) / counts[-1]
        var_w, var_d = noise.sigma ** 2 * (1 + 1 / counts[-1]), 0.0
    var_r = 0.0
    if runner is not None:
        var_r = runner.slope.var * (math.log(runner.speed) - float(weights @ np.log(runner.recorded))) ** 2
    var_m = other.var if other is not None else 0.0
    var = var_w + var_d + var_r + var_m
    df = var ** 2 / (var_w ** 2 / noise.df + (var_d ** 2 / drift.df if drift else 0.0)
                     + (var_m ** 2 / other.spread.df if other is not None else 0.0))
    return float(weights @ levels(sessions)), math.sqrt(var), df


def next_session_mds(sessions: Sessions, prior: Optional[Noise], alpha: float,
                     occasion: Optional[Sequence[int]] = None, drift: Optional[Drift] = None,
                     runner: Optional[Runner] = None, other: Optional[OtherMachine] = None) -> Optional[float]:
    """The minimum detectable slowdown of the next session against ``sessions`` at ``alpha``; None if unknown.

    ``drift``: that session runs on a new occasion with this spread of occasion offsets; None: the same one.
    ``runner``: where that session's runner stands on the yardstick. ``other``: it runs on a machine the file
    does not hold."""
    noise = moderated_noise(sessions, prior, occasion, runner.slope.fitted if runner else 0.0)
    if noise is None:
        return None
    _, se, df = _prediction_se(sessions, noise, occasion, drift, runner, other)
    return gate.mds(se, df, alpha)


def judge_sessions(sessions: Sessions, current: Sequence[float], threshold: float = gate.STORED_THRESHOLD,
                   alpha: float = gate.DEFAULT_ALPHA, prior: Optional[Noise] = None, runner: Optional[Runner] = None,
                   occasion: Optional[Sequence[int]] = None, drift: Optional[Drift] = None,
                   other: Optional[OtherMachine] = None) -> gate.Verdict:
    """This session's rounds against the recorded ``sessions``, at level ``alpha``.

    ``runner``: where both are on the yardstick (``on_yardstick`` with ``runner.slope``),
    this session's runner speed and the recorded sessions'. The slope's uncertainty
    widens the interval as the speed moves from theirs, the speed is named in the
    verdict's evidence (a runner far from its recorded speed, or a change that slows
    TensorFlow process-wide, shows there), and a speed beyond the recorded range by
    more than ``RUNNER_MARGIN`` fails only drops beyond ``gate.WIDE_BOUND``.
    ``occasion``: each recorded session's occasion (``occasions``; None: all one).
    ``drift``: this session runs on a new occasion, whose offset has this spread;
    None: it shares the newest recorded occasion (a session run within the hour of it),
    and is judged against that occasion's sessions alone.
    ``other``: this session runs on a machine none of ``sessions`` ran on (with ``drift``).

    Raises:
      ValueError: no recorded session, non-positive throughputs, or a runner whose recorded speeds do not
        match the sessions.
    """
    if not sessions or min(min(s) for s in sessions) <= 0 or min(current, default=0) <= 0:
        raise ValueError("judge_sessions() needs recorded sessions and positive throughputs")
    if other is not None and drift is None:
        raise ValueError("judge_sessions(): a session on another machine is on a new occasion: give its drift")
    if runner is not None and len(runner.recorded) != len(sessions):
        raise ValueError(f"judge_sessions(): {len(runner.recorded)} recorded runner speeds for {len(sessions)} "
                         "sessions")
    noise = moderated_noise(sessions, prior, occasion, runner.slope.fitted if runner else 0.0)
    on = "" if runner is None else (f" on the yardstick (runner at {runner.speed:.2f}x its recorded speed, "
                                    f"throughput following it to the power {runner.slope.beta:.2f})")
    if noise is None:
        v = _single_session(sessions[0], current, threshold, alpha)
        note = v.note + ("; recorded on another machine (record sessions on this one)" if other is not None else "")
        return dataclasses.replace(v, evidence=v.evidence + on, note=note)
    level, se, df = _prediction_se(sessions, noise, occasion, drift, runner, other)
    base, cur = math.exp(level), float(np.median(current))
    log_ratio = math.log(cur / base)
    score = log_ratio / se if se > 0 else math.copysign(math.inf, log_ratio)
    p_slower, p_faster = float(stats.t.cdf(score, df)), float(stats.t.sf(score, df))
    half = float(stats.t.ppf(0.975, df)) * se
    ratio = cur / base
    k = len(set(occasion)) if occasion is not None else 1
    where = f" on {k} occasion(s)" if drift else ""
    notes = ["one session of its own; spread pooled from the profile's others"] if len(sessions) == 1 else []
    if drift:
        notes.append(f"a new occasion: drift between occasions {drift.sigma:.1%} "
                     + ("assumed (record sessions on other days to measure this runner's)" if not drift.measured_df
                        else f"measured on {drift.measured_df} occasion contrast(s)"))
    if other is not None:
        m = other.spread
        notes.append(f"a machine the baselines do not hold: machines of this profile sit {m.sigma:.1%} apart per "
                     "workload, " + (f"measured on {m.measured_df} machine contrast(s)" if m.measured_df
                                     else "assumed") + " (record sessions on this machine with --update-baselines, "
                     "or compare in paired mode)")
    verdict, mds = gate.classify(ratio, p_slower, p_faster, threshold, alpha), gate.mds(se, df, alpha)
    if runner is not None and not _within_reach(runner.speed, runner.seen):
        bound = max(threshold, gate.WIDE_BOUND)
        verdict, mds = gate.classify_loosely(ratio, p_slower, p_faster, threshold, bound, alpha), max(mds, bound)
        low, high = runner.seen
        notes.append(f"the runner at {runner.speed:.2f}x is beyond the {low:.2f}-{high:.2f}x its baselines saw, "
                     f"where the yardstick does not correct every workload alike: only drops beyond {bound:.0%} fail "
                     "(record sessions on this runner as it is now, or compare in paired mode)")
    return gate.Verdict(base, cur, ratio, math.exp(log_ratio - half), math.exp(log_ratio + half), p_slower, p_faster,
                        threshold, verdict, alpha, mds, f"{len(sessions)} recorded session(s){where}{on}",
                        "; ".join(notes))


def _within_reach(speed: float, seen: Tuple[float, float]) -> bool:
    """Whether ``speed`` lies within the recorded range ``seen`` widened by RUNNER_MARGIN on either side."""
    return seen[0] * (1 - RUNNER_MARGIN) <= speed <= seen[1] * (1 + RUNNER_MARGIN)


def _single_session(recorded: Sequence[float], current: Sequence[float], threshold: float,
                    alpha: float) -> gate.Verdict:
    """One recorded session and nothing to pool: rounds against rounds, failing only beyond WIDE_BOUND."""
    bound = max(threshold, gate.WIDE_BOUND)
    note = (f"one session cannot tell session drift from a regression: only drops beyond {bound:.0%} fail; "
            "record more sessions with --update-baselines")
    if gate.smallest_p(len(recorded), len(current)) >= alpha:
        note += f"; {len(recorded)} vs {len(current)} rounds cannot reach alpha {alpha:.2g} at all"
    v = gate.rank_verdict(recorded, current, bound, alpha)
    verdict = gate.classify_loosely(v.ratio, v.p_slower, v.p_faster, threshold, bound, alpha)
    return dataclasses.replace(v, verdict=verdict, threshold=threshold, mds=bound, evidence="1 recorded session",
                               note=note)
