"""Why nothing is claimed, answered from plain values (``service/admission.py``): the
guards' order, the boards a pass may claim from, and what each claim passes over.
No daemon, no files: ``admit`` is pure. Each test names the mutation it catches."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from lane_runner.names import PROVIDERS
from lane_runner.service import breaker, disk, memory
from lane_runner.service.admission import (
    ELEVATED_PACE,
    BoardReading,
    Claimable,
    Guards,
    HoldKind,
    Readings,
    admit,
)
from lane_runner.service.breaker import Trip
from lane_runner.service.pause import Pause
from lane_runner.usage.spend import Totals

MIB = 1 << 20
NOW = 10_000.0
GUARDS = Guards(min_memory_mb=256, elevated_memory_mb=1024, min_disk_mb=16,
                daily_budget_usd={"*": 5.0})
PLENTY = memory.Reading(8192 * MIB, "MemAvailable")
ROOMY = (disk.Space("/home", 4096 * MIB),)


def trip(where: str, probe_at: float = NOW + 60) -> Trip:
    return Trip(where, "fp", "hook failed", ["b/1", "b/2", "b/3"], 3, NOW - 60, probe_at)


def provider_trips(*providers: str, probe_at: float = NOW + 60) -> dict[str, Trip]:
    found = [breaker.scope(breaker.PROVIDER, p) for p in providers]
    return {where: trip(where, probe_at) for where in found}


def readings(**changes: object) -> Readings:
    """A runner with four free slots, plenty of memory and disk, one open board ``b``."""
    values: dict[str, object] = {
        "now": NOW, "free": 4, "memory": PLENTY, "disk": ROOMY, "boards": (BoardReading("b"),),
    }
    values.update(changes)
    return Readings(**values)  # type: ignore[arg-type]


def spent(dollars: float) -> Totals:
    return Totals(cost_usd=dollars)


# -- the node's guards ------------------------------------------------------------------


def test_a_free_runner_claims_from_its_open_board() -> None:
    """Mutation: any guard holding on good readings (an inverted comparison)."""
    decision = admit(readings(), GUARDS)
    assert decision.hold is None
    assert decision.claims == 4
    assert decision.boards == (Claimable("b"),)


def test_a_pause_holds_before_every_other_guard() -> None:
    """Mutation: the memory (or disk) guard asked before the runner's pause."""
    short = memory.Reading(100 * MIB, "MemAvailable")
    full = (disk.Space("/home", 1 * MIB),)
    decision = admit(readings(paused=Pause("maintenance", 0.0, "ops"), memory=short, disk=full),
                     GUARDS)
    assert decision.hold is not None and decision.hold.kind is HoldKind.PAUSED
    assert decision.hold.reason == "runner paused: maintenance"
    assert (decision.claims, decision.boards) == (0, ())


def test_memory_holds_before_disk_and_names_its_minimum() -> None:
    """Mutation: the disk guard asked first, or the memory guard dropped."""
    short = memory.Reading(100 * MIB, "MemAvailable")
    full = (disk.Space("/home", 1 * MIB),)
    decision = admit(readings(memory=short, disk=full), GUARDS)
    assert decision.hold is not None and decision.hold.kind is HoldKind.MEMORY
    assert "under min_available_memory_mb = 256" in decision.hold.reason
    assert decision.pressure == memory.CRITICAL


def test_a_full_disk_holds() -> None:
    """Mutation: the disk guard dropped, or measured against the memory minimum."""
    decision = admit(readings(disk=(disk.Space("/repo", 8 * MIB),)), GUARDS)
    assert decision.hold is not None and decision.hold.kind is HoldKind.DISK
    assert "/repo has 8 MiB free, under min_free_disk_mb = 16" in decision.hold.reason


def test_the_breaker_holds_only_when_every_provider_is_broken() -> None:
    """Mutations: ``any`` provider broken holding claims; a trip whose probe is due
    counted as in force."""
    one = admit(readings(trips=provider_trips(PROVIDERS[0])), GUARDS)
    assert one.hold is None and one.claims == 4
    every = admit(readings(trips=provider_trips(*PROVIDERS)), GUARDS)
    assert every.hold is not None and every.hold.kind is HoldKind.BREAKER
    due = admit(readings(trips=provider_trips(*PROVIDERS, probe_at=NOW)), GUARDS)
    assert due.hold is None and due.claims == 4


def test_the_providers_caps_bound_the_claims() -> None:
    """Mutations: the caps' room ignored (claims = free slots), or a room of 0 not held."""
    assert admit(readings(room=2), GUARDS).claims == 2
    assert admit(readings(room=None), GUARDS).claims == 4
    full = admit(readings(room=0), GUARDS)
    assert full.hold is not None and full.hold.kind is HoldKind.CAPS and full.claims == 0


def test_no_free_slot_or_a_shutdown_holds_nothing() -> None:
    """A runner that is busy or stopping is not held back by anything: status must not
    say a pause keeps it from claiming. Mutation: the guards asked before the slots."""
    paused = Pause("maintenance", 0.0, "ops")
    for busy in (readings(free=0, paused=paused), readings(stopping=True, paused=paused)):
        assert admit(busy, GUARDS).hold is None
        assert admit(busy, GUARDS).claims == 0


def test_elevated_pressure_starts_one_run_per_pace() -> None:
    """Mutations: more than one run per pass under elevated pressure; a pass within the
    pace claiming; the pace's boundary taken as within."""
    elevated = memory.Reading(700 * MIB, "MemAvailable")
    soon = admit(readings(memory=elevated, since_elevated=ELEVATED_PACE / 2), GUARDS)
    assert (soon.hold, soon.claims, soon.pressure) == (None, 0, memory.ELEVATED)
    later = admit(readings(memory=elevated, since_elevated=ELEVATED_PACE), GUARDS)
    assert (later.hold, later.claims) == (None, 1)


def test_unknown_memory_fails_open() -> None:
    """Mutation: a runner whose memory cannot be read held as short of it."""
    decision = admit(readings(memory=None), GUARDS)
    assert decision.hold is None and decision.pressure == memory.OK


# -- the boards -------------------------------------------------------------------------


def test_paused_boards_are_passed_over_and_all_paused_holds() -> None:
    """Mutations: a paused board claimed from; every board paused said as nothing held."""
    some = admit(readings(boards=(BoardReading("a", paused=True), BoardReading("b"))), GUARDS)
    assert [board.slug for board in some.boards] == ["b"] and some.hold is None
    every = admit(readings(boards=(BoardReading("a", True), BoardReading("b", True))), GUARDS)
    assert every.hold is not None and every.hold.kind is HoldKind.BOARD_PAUSED
    assert every.hold.reason == "every board is paused (a, b)" and every.boards == ()


def test_no_board_at_all_holds_nothing() -> None:
    """Mutation: an empty store taken for every board paused."""
    decision = admit(readings(boards=()), GUARDS)
    assert (decision.hold, decision.boards, decision.claims) == (None, (), 4)


def test_a_board_at_its_daily_budget_is_passed_over() -> None:
    """Mutations: a budget spent only past its limit (``>`` for ``>=``); the budget read
    from the wrong board's entry; a board without a budget taken as spent."""
    guards = Guards(daily_budget_usd={"a": 2.0})
    boards = (BoardReading("a", today=spent(2.0)), BoardReading("b"))
    decision = admit(readings(boards=boards), guards)
    assert [board.slug for board in decision.boards] == ["b"]
    within = admit(readings(boards=(BoardReading("a", today=spent(1.99)),)), guards)
    assert [board.slug for board in within.boards] == ["a"]


def test_every_open_board_spent_holds_and_says_each() -> None:
    """Mutation: a paused board counted among the open ones (no hold would be said)."""
    boards = (BoardReading("a", today=spent(9.0)), BoardReading("b", paused=True))
    decision = admit(readings(boards=boards), GUARDS)
    assert decision.hold is not None and decision.hold.kind is HoldKind.BUDGET
    assert decision.hold.reason.startswith("every open board's daily budget is spent (a: ")
    assert "daily budget $5.0000 spent ($9.0000 today, UTC)" in decision.hold.reason


def test_a_broken_board_is_passed_over_until_its_probe_is_due() -> None:
    """Mutations: a board marked broken claimed from; one whose probe is due skipped, or
    claimed without saying its claim is the probe."""
    a_broken = {breaker.scope(breaker.BOARD, "a"): trip(breaker.scope(breaker.BOARD, "a"))}
    boards = (BoardReading("a"), BoardReading("b"))
    decision = admit(readings(boards=boards, trips=a_broken), GUARDS)
    assert decision.boards == (Claimable("b"),)
    only = admit(readings(boards=boards[:1], trips=a_broken), GUARDS)
    assert only.hold is not None and only.hold.kind is HoldKind.BREAKER
    due = {where: trip(where, probe_at=NOW) for where in a_broken}
    probing = admit(readings(boards=boards, trips=due), GUARDS)
    assert probing.boards == (Claimable("a", probe=True), Claimable("b"))


def test_a_claim_passes_over_its_boards_broken_workspaces() -> None:
    """Mutations: another board's broken workspace passed over here; a workspace whose
    probe is due passed over (its task is the probe), or not said to be probing."""
    trips = {
        where: trip(where, probe_at)
        for where, probe_at in (
            (breaker.workspace_scope("b", "/srv/held"), NOW + 60),
            (breaker.workspace_scope("b", "/srv/due"), NOW),
            (breaker.workspace_scope("a", "/srv/other"), NOW + 60),
        )
    }
    (board,) = admit(readings(trips=trips), GUARDS).boards
    assert board == Claimable("b", skip=frozenset({"/srv/held"}),
                              probing=frozenset({"/srv/due"}))
    after = board.probed("/srv/due")
    assert after.skip == {"/srv/held", "/srv/due"} and after.probing == frozenset()
    assert board.probed("/srv/elsewhere") is board


# -- properties -------------------------------------------------------------------------

SLUGS = ("a", "b", "c", "d")


@st.composite
def boards_and_trips(draw: st.DrawFn) -> tuple[tuple[BoardReading, ...], dict[str, Trip]]:
    slugs = draw(st.lists(st.sampled_from(SLUGS), unique=True, max_size=len(SLUGS)))
    boards = tuple(
        BoardReading(slug, draw(st.sampled_from((False, False, True))),
                     draw(st.none() | st.floats(0, 7).map(spent)))
        for slug in slugs
    )
    trips = {}
    for slug in draw(st.lists(st.sampled_from(SLUGS), unique=True)):
        where = breaker.scope(breaker.BOARD, slug)
        trips[where] = trip(where, draw(st.sampled_from((NOW - 1, NOW, NOW + 1))))
    return boards, trips


@given(boards_and_trips(), st.integers(-2, 6), st.none() | st.integers(0, 6))
def test_claims_come_only_from_open_boards_within_budget_and_not_broken(
    found: tuple[tuple[BoardReading, ...], dict[str, Trip]], free: int, room: int | None
) -> None:
    """The boards admitted are exactly those unpaused, under their day's budget and not
    marked broken (probe due counts as not), in the store's order; claims never exceed
    the free slots or the caps' room; and a hold is said exactly when boards exist and
    none is admitted. Mutations: any one filter dropped or inverted, the order changed,
    a hold said while a board is admitted, the caps ignored."""
    boards, trips = found
    decision = admit(readings(boards=boards, trips=trips, free=free, room=room), GUARDS)
    if free <= 0:
        assert (decision.hold, decision.claims, decision.boards) == (None, 0, ())
        return
    if room == 0:
        assert decision.hold is not None and decision.hold.kind is HoldKind.CAPS
        return
    expected = [
        board.slug for board in boards
        if not board.paused
        and (board.today is None or board.today.cost_usd < 5.0)
        and not (breaker.scope(breaker.BOARD, board.slug) in trips
                 and trips[breaker.scope(breaker.BOARD, board.slug)].probe_at > NOW)
    ]
    assert [board.slug for board in decision.boards] == expected
    assert 0 < decision.claims <= min(free, room if room is not None else free)
    assert (decision.hold is not None) == (bool(boards) and not expected)


@given(boards_and_trips(), st.integers(1, 6))
def test_admitting_is_idempotent_and_the_node_part_never_reads_boards(
    found: tuple[tuple[BoardReading, ...], dict[str, Trip]], free: int
) -> None:
    """The daemon asks twice, first without the boards: what the node says then must be
    what it says with them (claims and a node's hold do not depend on boards).
    Mutation: the claims' number computed from the boards admitted."""
    boards, trips = found
    without = admit(readings(boards=(), trips=trips, free=free), GUARDS)
    with_boards = admit(readings(boards=boards, trips=trips, free=free), GUARDS)
    assert without.claims == with_boards.claims
    assert without.pressure == with_boards.pressure
