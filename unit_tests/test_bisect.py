"""Bisect: the walk over real commits of a small git repository, the halving search, skips and worktree hygiene.

The judge in the search tests reads each commit's own ``speed.txt`` with git,
so what the search sees is what the commit holds; the paired judge that times
real workers is covered end to end by ``test_bisect_cli``.
"""

import os
import subprocess
import sys

import pytest

from hpcnn.perf import bisection
from hpcnn.perf.bisection import BAD, GOOD, SKIP, BisectError, Step, Worktrees
from unit_tests.helpers import REPO


def _git(repo, *args):
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout.strip()


def _history(path, speeds, broken=()):
    """A repository whose commit i holds ``speed.txt`` = speeds[i] (and ``broken`` where i is in it)."""
    os.makedirs(path)
    _git(path, "init", "-q", "-b", "main")
    _git(path, "config", "user.email", "t@example.com")
    _git(path, "config", "user.name", "t")
    for i, speed in enumerate(speeds):
        with open(os.path.join(path, "speed.txt"), "w") as f:
            f.write(str(speed))
        flag = os.path.join(path, "broken")
        if i in broken:
            open(flag, "w").close()
        elif os.path.exists(flag):
            os.remove(flag)
        _git(path, "add", "-A")
        _git(path, "commit", "-q", "--allow-empty", "-m", f"commit {i}")
    return _git(path, "rev-list", "--reverse", "HEAD").split()


def _judge(repo, good_speed, seen):
    """Bad when the commit's speed is 10% or more below good's; skipped when the commit holds ``broken``."""

    def judge(commit):
        seen.append(commit)
        files = _git(repo, "ls-tree", "--name-only", commit).split()
        if "broken" in files:
            return Step(commit, SKIP, why="does not build")
        speed = float(_git(repo, "show", f"{commit}:speed.txt"))
        return Step(commit, BAD if speed < 0.9 * good_speed else GOOD)

    return judge


@pytest.mark.parametrize("first_bad", range(1, 10))
def test_search_names_the_commit_where_the_speed_dropped_in_few_tries(tmp_path, first_bad):
    speeds = [100, 101, 99, 100, 102, 98, 100, 101, 99, 100]
    speeds = speeds[:first_bad] + [s * 0.8 for s in speeds[first_bad:]]
    commits = _history(str(tmp_path / "r"), speeds)
    between = bisection.commits_between(commits[0], commits[-1], cwd=str(tmp_path / "r"))
    assert between == commits[1:]
    seen = []
    result = bisection.search(between, _judge(str(tmp_path / "r"), 100, seen), log=lambda _: None)
    assert result.first_bad == commits[first_bad]
    assert seen[0] == commits[-1]  # bad is confirmed first
    assert len(seen) <= 1 + 4  # bad, then ceil(log2(9)) halvings
    assert len(set(seen)) == len(seen)
    assert result.step_of(commits[first_bad]).outcome == BAD


def test_search_ends_without_candidates_when_bad_is_not_slower(tmp_path):
    commits = _history(str(tmp_path / "r"), [100, 99, 101, 100])
    seen = []
    result = bisection.search(commits[1:], _judge(str(tmp_path / "r"), 100, seen), log=lambda _: None)
    assert result.candidates == [] and result.first_bad is None and seen == [commits[-1]]


def test_a_skipped_commit_is_replaced_by_its_neighbour_and_hides_only_itself(tmp_path):
    speeds = [100, 100, 100, 100, 100, 100, 70, 70, 70]
    commits = _history(str(tmp_path / "r"), speeds, broken={4})  # a good commit that does not build
    result = bisection.search(commits[1:], _judge(str(tmp_path / "r"), 100, []), log=lambda _: None)
    assert [s.commit for s in result.steps] == [commits[8], commits[4], commits[3], commits[5], commits[6]]
    assert [s.outcome for s in result.steps] == [BAD, SKIP, GOOD, GOOD, BAD]  # the middle, then its neighbour
    assert result.first_bad == commits[6]


def test_skipped_commits_next_to_the_first_bad_one_are_named_as_candidates(tmp_path):
    speeds = [100, 100, 100, 70, 70, 70, 70]
    commits = _history(str(tmp_path / "r"), speeds, broken={2, 3})  # the change and the commit before it
    result = bisection.search(commits[1:], _judge(str(tmp_path / "r"), 100, []), log=lambda _: None)
    assert result.first_bad is None
    assert result.candidates == commits[2:5]  # either skipped one, or the first bad commit that builds


def test_commits_between_refuses_what_cannot_be_bisected(tmp_path):
    repo = str(tmp_path / "r")
    commits = _history(repo, [1, 2, 3])
    with pytest.raises(BisectError, match="--good='nope' is not a commit of this repository"):
        bisection.commits_between("nope", commits[-1], cwd=repo)
    with pytest.raises(BisectError, match="are the same commit"):
        bisection.commits_between(commits[-1], "main", cwd=repo)
    with pytest.raises(BisectError, match="--good='main' is not an ancestor of --bad="):
        bisection.commits_between("main", commits[0], cwd=repo)
    _git(repo, "checkout", "-q", "-b", "side", commits[0])
    with open(os.path.join(repo, "other.txt"), "w") as f:
        f.write("x")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "side")
    with pytest.raises(BisectError, match="is not an ancestor"):
        bisection.commits_between("side", "main", cwd=repo)


def test_first_parent_walk_keeps_a_merged_branch_as_one_step(tmp_path):
    repo = str(tmp_path / "r")
    commits = _history(repo, [1, 2])
    _git(repo, "checkout", "-q", "-b", "topic")
    for name in ("a", "b"):
        with open(os.path.join(repo, name), "w") as f:
            f.write(name)
        _git(repo, "add", "-A")
        _git(repo, "commit", "-q", "-m", name)
    _git(repo, "checkout", "-q", "main")
    _git(repo, "merge", "-q", "--no-ff", "-m", "merge topic", "topic")
    merge = _git(repo, "rev-parse", "HEAD")
    assert bisection.commits_between(commits[0], "main", cwd=repo) == [commits[1], merge]


def test_worktrees_are_removed_on_exit_also_after_an_error(tmp_path):
    repo = str(tmp_path / "r")
    commits = _history(repo, [1, 2, 3])
    before = _git(repo, "worktree", "list")
    work = tmp_path / "w"
    work.mkdir()
    with pytest.raises(RuntimeError, match="interrupted"):
        with Worktrees(str(work), cwd=repo) as trees:
            path = trees.add(commits[1])
            with open(os.path.join(path, "speed.txt")) as f:
                assert f.read() == "2"
            assert trees.source(str(tmp_path)) == str(tmp_path)  # a directory is used as it is
            trees.add(commits[2])
            raise RuntimeError("interrupted")
    assert _git(repo, "worktree", "list") == before
    assert os.listdir(work) == []
    assert _git(repo, "status", "--porcelain") == ""
    with Worktrees(str(work), cwd=repo) as trees:
        with pytest.raises(BisectError, match="'nope' is neither a directory nor a git revision"):
            trees.source("nope")


@pytest.mark.slow
def test_bisect_cli_refuses_bad_input_in_one_line(tmp_path):
    def run(*args, cwd=REPO):
        return subprocess.run([sys.executable, "-m", "hpcnn.perf.cli", "bisect", *args], cwd=cwd,
                              capture_output=True, text=True, timeout=300)

    p = run("--good=no-such-rev-xyz", "--only=trivial-parameter_server")
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert "--good='no-such-rev-xyz' is not a commit of this repository" in p.stderr
    p = run("--good=HEAD~1", "--only=trivial")
    assert p.returncode == 2 and "--only='trivial' matches 3 combinations; bisect follows one" in p.stderr
    # A repository without hpcnn: the good revision's worker refuses to time the installed hpcnn instead.
    repo = str(tmp_path / "r")
    _history(repo, [1, 2, 3])
    before = _git(repo, "worktree", "list")
    p = run("--good=main~2", "--only=trivial-parameter_server", cwd=repo)
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr[-2000:]
    assert "--good='main~2' does not run trivial-parameter_server" in p.stderr
    assert "has no hpcnn package" in p.stderr
    assert _git(repo, "worktree", "list") == before
