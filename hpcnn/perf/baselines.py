"""Baselines per hardware profile: ``baselines/<profile-id>.json``, written atomically."""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
import statistics
import subprocess
import tempfile
from typing import Dict, Optional, Sequence

SCHEMA_VERSION = 1


class BaselineError(ValueError):
    """A baselines file is malformed; the message names the file and what is wrong."""


def summarize(samples: Sequence[float]) -> dict:
    """Median, spread (interquartile range) and number of rounds of per-round images/sec."""
    s = sorted(samples)
    q = statistics.quantiles(s, n=4) if len(s) > 1 else [s[0]] * 3
    return {"median": statistics.median(s), "iqr": q[2] - q[0], "rounds": len(s)}


def entry(samples: Sequence[float], commit: Optional[str], threshold: Optional[float] = None) -> dict:
    """One combination's baseline record."""
    e = {"samples": list(samples), **summarize(samples), "commit": commit,
         "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}
    if threshold is not None:
        e["threshold"] = threshold
    return e


def path_for(directory: str, profile_id: str) -> str:
    return os.path.join(directory, f"{profile_id}.json")


@dataclasses.dataclass
class Baselines:
    """A baselines file: the profile it was recorded on (None for a new file) and its combinations."""

    profile: Optional[dict]
    combinations: Dict[str, dict]


def load(path: str) -> Baselines:
    """The file at ``path``; no profile and no combinations when it does not exist.

    Raises:
      BaselineError: the file is not JSON or not of the baselines schema.
    """
    if not os.path.exists(path):
        return Baselines(None, {})
    try:
        with open(path) as f:
            data = json.load(f)
    except (OSError, ValueError) as e:
        raise BaselineError(f"baselines file {path}: not readable JSON ({e})") from None
    if not isinstance(data, dict) or not isinstance(data.get("combinations"), dict):
        raise BaselineError(f"baselines file {path}: expected an object with a 'combinations' object")
    for key, rec in data["combinations"].items():
        samples = rec.get("samples") if isinstance(rec, dict) else None
        if not (isinstance(samples, list) and samples and all(isinstance(x, (int, float)) and x > 0
                                                              for x in samples)):
            raise BaselineError(f"baselines file {path}: combination {key!r} needs 'samples', a non-empty list "
                                "of positive images/sec figures")
        t = rec.get("threshold")
        if t is not None and not (isinstance(t, (int, float)) and 0 < t < 1):
            raise BaselineError(f"baselines file {path}: combination {key!r} has threshold={t!r}; "
                                "allowed: a fraction between 0 and 1")
    profile = data.get("profile")
    if not isinstance(profile, dict):
        raise BaselineError(f"baselines file {path}: expected the 'profile' it was recorded on (an object)")
    return Baselines(profile, data["combinations"])


def save(path: str, profile: dict, combinations: Dict[str, dict]) -> None:
    """Merges ``combinations`` into the file at ``path``, atomically.

    The new content goes to a temporary file in the same directory which is then
    renamed over the old one, so an interrupted run never leaves half a file.
    Existing per-combination thresholds are kept.
    """
    existing = load(path).combinations
    for key, rec in combinations.items():
        if "threshold" in existing.get(key, {}) and "threshold" not in rec:
            rec = {**rec, "threshold": existing[key]["threshold"]}
        existing[key] = rec
    data = {"schema": SCHEMA_VERSION, "profile": profile, "combinations": dict(sorted(existing.items()))}
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".baselines-", suffix=".json")
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=2)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def current_commit(cwd: Optional[str] = None) -> Optional[str]:
    """The git commit of the checkout at ``cwd`` (default: this package's), or None."""
    cwd = cwd or os.path.dirname(os.path.abspath(__file__))
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None
