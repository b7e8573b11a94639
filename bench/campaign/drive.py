"""One campaign: tasks kept flowing onto the board while the seeded schedule kills -9
the daemons (one, or both) and the CLIs they run, and starts each killed daemon again
(after ``lane-runner recover`` when the schedule says so); then everything is let
finish, both daemons are stopped, and the evidence is counted."""

from __future__ import annotations

import logging
import os
import secrets
import signal
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from bench.campaign import evidence
from bench.campaign.schedule import Step, schedule, task_body
from bench.campaign.site import Runner, Site
from bench.campaign.tally import Counts, count

log = logging.getLogger(__name__)
UP_TIMEOUT = 90.0
"""Seconds a (re)started daemon has to finish its recovery: past it the campaign fails."""
STOP_TIMEOUT = 30.0
"""Seconds a stopped daemon has to exit (its ``shutdown_grace`` is 1 s)."""
FOLLOW_UP_TIMEOUT = 30.0
LEFTOVER_TIMEOUT = 3.0
"""Seconds processes a killed daemon left (a hook's sleep) have to end by themselves."""


@dataclass(frozen=True)
class Plan:
    seed: int
    kills: int
    backlog: int = 6
    """Tasks kept ready or running while the kills go on: the daemons always have work."""
    seconds: float | None = None
    """Seconds the kills may take: past them the schedule stops early (its prefix is the
    same for a seed; how far it gets depends on the machine). None: every step."""
    settle: float = 240.0
    """Seconds the last tasks have, after the last kill, to end done or blocked."""

    @classmethod
    def chosen(cls, environ: Mapping[str, str], kills: int, seconds: float | None,
               backlog: int = 6) -> Plan:
        """The plan ``LANE_CAMPAIGN_SEED``, ``LANE_CAMPAIGN_KILLS`` and
        ``LANE_CAMPAIGN_SECONDS`` ask for, else a fresh seed and the given size.
        A seed given with its kills replays the whole schedule: no time budget then."""
        seed = _whole(environ, "LANE_CAMPAIGN_SEED")
        asked = _whole(environ, "LANE_CAMPAIGN_KILLS")
        budget = environ.get("LANE_CAMPAIGN_SECONDS")
        if budget is not None:
            try:
                seconds = float(budget)
            except ValueError:
                raise ValueError(f"LANE_CAMPAIGN_SECONDS={budget!r} is not a number of "
                                 "seconds") from None
        elif seed is not None and asked is not None:
            seconds = None
        return cls(
            seed=secrets.randbelow(1 << 31) if seed is None else seed,
            kills=kills if asked is None else asked,
            seconds=seconds,
            backlog=backlog,
        )


@dataclass
class Outcome:
    plan: Plan
    counts: Counts
    kills: int = 0
    steps: int = 0
    scheduled: int = 0
    """The kills the steps taken asked for (a CLI kill finds no CLI at times): with the
    seed, the size that replays exactly these steps."""
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)
    """What went wrong around the counts (a daemon that would not stop, a recover that
    failed): said with the counts, never swallowed."""

    @property
    def line(self) -> str:
        return self.counts.line(self.plan.seed, self.kills)

    @property
    def clean(self) -> bool:
        return not self.counts.failed() and not self.notes

    def reproduce(self, command: str) -> str:
        """How to run this campaign again: its seed and the size of the steps it took (the
        seed's schedule to that size is those steps), in front of ``command``."""
        return (f"LANE_CAMPAIGN_SEED={self.plan.seed} LANE_CAMPAIGN_KILLS={self.scheduled} "
                f"{command}")

    def report(self) -> str:
        """The counts, what each non-zero one counted, and the notes: for a failure."""
        found = [f"  {name}: {', '.join(items[:20])}" for name, items in
                 self.counts.examples.items()]
        return "\n".join([self.line, *found, *(f"  note: {note}" for note in self.notes)])


def _whole(environ: Mapping[str, str], name: str) -> int | None:
    value = environ.get(name)
    if value is None:
        return None
    if not value.isdigit():
        raise ValueError(f"{name}={value!r} is not a whole number")
    return int(value)


class Campaign:
    def __init__(self, site: Site, plan: Plan) -> None:
        self.site, self.plan = site, plan
        self.added = 0
        self.kills = 0
        self.notes: list[str] = []

    def run(self) -> Outcome:
        started = time.monotonic()
        self.top_up()
        for runner in self.site.runners:
            runner.start()
        taken = scheduled = 0
        for step in schedule(self.plan.seed, self.plan.kills):
            if self.plan.seconds is not None and time.monotonic() - started > self.plan.seconds:
                break
            self.top_up()
            self.kills += self.kill(step)
            taken += 1
            scheduled += step.kills
        log.info("%d steps, %d kills in %.1f s", taken, self.kills, time.monotonic() - started)
        self.finish()
        log.info("finished after %.1f s", time.monotonic() - started)
        counts = count(evidence.gather(self.site))
        return Outcome(self.plan, counts, self.kills, taken, scheduled,
                       time.monotonic() - started, self.notes)

    def top_up(self) -> None:
        counts = self.site.board.counts()
        for _ in range(self.plan.backlog - counts["ready"] - counts["running"]):
            self.site.add_task(self.added, task_body(self.plan.seed, self.added))
            self.added += 1

    def kill(self, step: Step) -> int:
        """Carry out one step; how many processes it killed."""
        if step.cli_of is not None:
            runner = self.site.runners[step.cli_of]
            self.wait_up(runner)
            time.sleep(step.delay)
            return self.kill_cli(runner)
        victims = [self.site.runners[index] for index in step.victims]
        for runner in victims:
            if not step.during_start:
                self.wait_up(runner)
        time.sleep(step.delay)
        for runner in victims:
            runner.kill()
        for runner, recover_first in zip(victims, step.recover_first, strict=True):
            if recover_first:
                status = runner.recover()
                if status != 0:
                    self.notes.append(f"recover of {runner.root.name} failed ({status}): "
                                      f"{runner.log_tail(500)}")
            runner.start()
        return len(victims)

    def wait_up(self, runner: Runner) -> None:
        """Until the runner's daemon has recovered and claims; one that ended by itself is
        noted and started again."""
        deadline = time.monotonic() + UP_TIMEOUT
        waited = time.monotonic()
        while not runner.up():
            if not runner.alive():
                self.notes.append(f"the daemon of {runner.root.name} ended by itself "
                                  f"({runner.daemon and runner.daemon.returncode}): "
                                  f"{runner.log_tail(500)}")
                runner.start()
            if time.monotonic() > deadline:
                raise TimeoutError(f"the daemon of {runner.root.name} did not come up within "
                                   f"{UP_TIMEOUT:g} s:\n{runner.log_tail()}")
            time.sleep(0.02)
        now = time.monotonic()
        log.info("%s up %.2f s after its start (waited %.2f s)", runner.root.name,
                 now - runner.spawned, now - waited)

    @staticmethod
    def kill_cli(runner: Runner) -> int:
        """kill -9 the CLI of the runner's oldest run, if it runs one now."""
        for pid in sorted(runner.cli_pids()):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                continue  # it ended by itself meanwhile: try the next
            return 1
        return 0

    def finish(self) -> None:
        """Let every task end, the follow-ups run, both daemons stop, their leftovers end."""
        for runner in self.site.runners:
            self.wait_up(runner)
        self.wait(self.settled, self.plan.settle, "every task done or blocked")
        self.wait(self.followed, FOLLOW_UP_TIMEOUT, "the follow-ups of every done task")
        for runner in self.site.runners:
            runner.dismiss()
            if runner.stop(STOP_TIMEOUT) is None:
                self.notes.append(f"the daemon of {runner.root.name} did not stop within "
                                  f"{STOP_TIMEOUT:g} s of SIGTERM: {runner.log_tail(500)}")
        self.wait(lambda: not evidence.ours(self.site.root), LEFTOVER_TIMEOUT, "")

    def settled(self) -> bool:
        counts = self.site.board.counts()
        return counts["ready"] + counts["running"] + counts["todo"] == 0

    def followed(self) -> bool:
        return not evidence.unfollowed(self.site)

    def wait(self, condition: Callable[[], bool], timeout: float, what: str) -> None:
        """Poll ``condition`` up to ``timeout``; what did not happen is noted when named
        (the counts then say what it left behind)."""
        deadline = time.monotonic() + timeout
        while not condition():
            if time.monotonic() > deadline:
                if what:
                    self.notes.append(f"gave up waiting {timeout:g} s for {what}")
                return
            time.sleep(0.1)


def run(root: Path, url: str, plan: Plan) -> Outcome:
    """Run the campaign ``plan`` in ``root`` on the (empty) PostgreSQL database ``url``."""
    site = Site(root, url)
    try:
        return Campaign(site, plan).run()
    finally:
        site.close()
