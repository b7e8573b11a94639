"""How many git commands the runner runs per task (issue 46: the runner's own CPU per task).

Each git call is a supervised process tree (``run/command.py``): a cgroup, a launcher, a
pidfd, the tree's end. Most of the runner's own CPU per instant task went there
(bench/FINDINGS.md), so the number of calls per task is held here, counted on a real
daemon by ``tests/holding/sitecustomize.py`` around ``run/git.run``.
"""

from __future__ import annotations

from collections import Counter

from tests.harness import Lane, assert_done_exactly_once, git_counted

#: git commands per instant task committed to its branch, the daemon's start included
#: (41 before issue 46's budget: the repository's top, common directory and folder asked
#: three times, each candidate branch name and HEAD one ``rev-parse`` each, the tip read
#: again after the commit that was just checked to be it; then 31 before the commit's
#: top folder, git directories and parent came from one ``rev-parse``, ``snapshot.place``;
#: then 29 before the repository's object format and checked-out branch came with its top
#: (``workspace._where``: no ``rev-parse`` in the checkout, no ``worktree prune`` or
#: ``worktree list`` where it has no linked worktree) and HEAD's branch with its commit
#: (``branchhead.where``); then 25 before a result this run accepted was no longer searched
#: for on the branch (``Accepted._commit``: only an earlier run's can be there).
BUDGET = 24
TASKS = 4


def test_an_instant_task_costs_at_most_the_budget_of_git_calls(lane: Lane) -> None:
    tally = lane.root / "git-calls.tsv"
    lane.extra_env.update(git_counted(tally))
    for index in range(TASKS):
        lane.add(f"task {index}")
    assert lane.start("--until-idle").wait(timeout=120) == 0
    assert_done_exactly_once(lane.board, [lane.home])
    lines = tally.read_text().splitlines()
    kinds = Counter(line.split()[0] for line in lines)
    per_task = len(lines) / TASKS
    assert per_task <= BUDGET, f"{per_task:.2f} git calls per task: {kinds.most_common()}"
