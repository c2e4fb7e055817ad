"""The trend report: an HTML page with one plot per combination of a history, change points marked."""

from __future__ import annotations

import html
import os
from typing import Optional, Sequence, Tuple

from hpcnn import jsonfile
from hpcnn.perf.history import Change, History, Point, find_changes


def plot_series(points: Sequence[Point], changes: Sequence[Change], title: str, path: str,
                ylabel: str = "images/sec") -> None:
    """Images/sec per commit (median, and the rounds' range), steps marked with commit and size, refreshes marked."""
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt

    x = list(range(len(points)))
    fig, ax = plt.subplots(figsize=(9, 3.6), dpi=100)
    low = [min(p.rounds) for p in points]
    high = [max(p.rounds) for p in points]
    ax.vlines(x, low, high, color="#9bb7d4", linewidth=3, label="rounds (min to max)")
    ax.plot(x, [p.median for p in points], "o-", color="#1f4e79", markersize=4, label="median")
    for c in changes:
        colour = "#c0392b" if c.ratio < 1 else "#1e8449"
        ax.axvline(c.index - 0.5, color=colour, linestyle="--", linewidth=1.2)
        ax.annotate(f"{c.after[:7]} {c.ratio - 1:+.1%}", (c.index - 0.5, 1.0), xycoords=("data", "axes fraction"),
                    xytext=(3, -12), textcoords="offset points", color=colour, fontsize=9, fontweight="bold")
    refreshes = [i for i, p in enumerate(points) if p.refresh]
    if refreshes:
        ax.plot(refreshes, [low[i] for i in refreshes], "^", color="#7d3c98", markersize=8, label="baseline refresh")
    every = max(1, len(points) // 20)  # at most about 20 commit labels
    ax.set_xticks(x[::every], [p.commit[:7] for p in points][::every], rotation=60, fontsize=7, ha="right")
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=7, loc="lower left")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


YARDSTICK_LABEL = "images/sec on the yardstick"  # at the runner's median speed (History.series)


def write_report(history: History, out_dir: str, profile: str = "", only: str = "", alpha: float = 0.01,
                 jobs: Optional[int] = None, by_yardstick: Optional[bool] = None) -> str:
    """Writes ``index.html`` and one PNG per combination into ``out_dir``, steps found at ``alpha`` marked;
    returns the page's path.

    Each combination's change search and plot are independent and CPU-bound (a 500-commit series: about a
    second each), so ``jobs`` processes (default: one per core) share them; the page lists them in the
    history's order whatever order they finish in. ``by_yardstick``: ``History.selected``'s; each plot's
    axis says which reading it shows.
    """
    os.makedirs(out_dir, exist_ok=True)
    work = [(pid, key, points, out_dir, alpha, YARDSTICK_LABEL if on else "images/sec")
            for pid, key, points, on in history.selected(profile, only, by_yardstick)]
    jobs = min(jobs or os.cpu_count() or 1, len(work))
    if jobs > 1:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        # spawn: a fresh interpreter per worker, never a fork of a process that may hold TensorFlow's threads
        with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
            parts = list(pool.map(_combination, work, chunksize=max(1, len(work) // (4 * jobs))))
    else:
        parts = [_combination(w) for w in work]
    page = ("<!doctype html><html><head><meta charset='utf-8'><title>hpcnn throughput history</title><style>"
            "body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}td,th{border:1px solid #ccc;"
            "padding:4px 8px;font-size:13px}img{max-width:100%}</style></head><body>"
            "<h1>hpcnn throughput history</h1><table><tr><th>profile</th><th>combination</th><th>commits</th>"
            "<th>latest images/sec</th><th>steps</th><th>newest step</th></tr>" + "".join(r for r, _ in parts)
            + "</table>" + "".join(section for _, section in parts) + "</body></html>\n")
    path = os.path.join(out_dir, "index.html")
    jsonfile.write_text_atomically(path, page)
    return path


def _combination(item) -> Tuple[str, str]:
    """One combination's steps and plot: (its overview table row, its section of the page)."""
    pid, key, points, out_dir, alpha, ylabel = item
    changes = find_changes(points, alpha)
    image = f"{pid}--{key}.png"
    plot_series(points, changes, f"{key}  ({pid})", os.path.join(out_dir, image), ylabel)
    latest = changes[-1].describe() if changes else "none"
    row = (f"<tr><td>{html.escape(pid)}</td><td><a href='#{html.escape(image)}'>{html.escape(key)}</a>"
           f"</td><td>{len(points)}</td><td>{points[-1].median:.2f}</td><td>{len(changes)}</td>"
           f"<td>{html.escape(latest)}</td></tr>")
    steps = "".join(f"<li>{html.escape(c.describe())}</li>" for c in reversed(changes)) or "<li>none</li>"
    section = (f"<h2 id='{html.escape(image)}'>{html.escape(key)}</h2><p>{html.escape(pid)}</p>"
               f"<img src='{html.escape(image)}' alt='{html.escape(key)}'><ul>{steps}</ul>")
    return row, section
