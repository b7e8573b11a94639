"""This runner's node id, bound to the home it was made for (docs/ARCHITECTURE.md §3.1).

Claims belong to a node id: recovery reclaims every open run of its node, and ends
every leftover process that carries it. A copy of a home (a restored volume
snapshot, ``cp -a``, ``rsync``) carries the same id; run beside its original, its
recovery would reclaim the original's live runs on a shared board, and its daemon
would run each task of the copied boards a second time. So the id is bound to the
home it was made for, in ``node-home.json`` beside ``node-id``: the home
directory's inode and real path. A home that is not that one is refused until the
operator says what it is: the same runner, moved or restored in place of the lost
original (``recover --adopt``), or a runner of its own (``recover --new-node``).
Refusing, rather than quietly taking a new id, is the careful default: a copy is
most often a backup being looked at, and running it would repeat work the original
did; and the original, if it is gone for good, is best adopted at once, so its runs
resume now instead of after their leases.

Why the inode and the path, and not the device: one volume's device number may
change across reboots and remounts (that would stop a home after every reboot),
while a copy has a new inode, and a snapshot mounted beside its original a new
path. A block-level snapshot restored at the same path keeps both, and is rightly
taken for the same runner. A home that predates the binding is bound on first use.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass

import orjson

from lane_runner import files
from lane_runner.errors import LaneRunnerError
from lane_runner.home import Home, fresh_node_id

log = logging.getLogger(__name__)

BINDING_BYTES = 8192


class HomeCopied(LaneRunnerError):
    """The node id was made for another home: this one is a copy, or was moved."""


@dataclass(frozen=True)
class Place:
    """Where a home is: its real path and its directory's inode."""

    path: str
    inode: int

    def __str__(self) -> str:
        return f"{self.path} (inode {self.inode})"


def place_of(home: Home) -> Place:
    return Place(os.path.realpath(home.root), os.stat(home.root).st_ino)


def node_id(home: Home) -> str:
    """The node id, once this home is known to be the one it was made for.

    Raises HomeCopied, saying what to do, when the id was made for another home.
    """
    node = home.node_id()
    here = place_of(home)
    bound = _binding(home)
    if bound is None:
        _bind(home, node, here)
        return node
    if bound == (node, here):
        return node
    raise HomeCopied(_explain(home, node, bound, here))


def problem(home: Home) -> str | None:
    """Why the daemon and ``recover`` would refuse this home, or None; only reads (for
    ``doctor``): a home without a node id, or not bound yet, is bound on first use."""
    if not home.node_file.exists():
        return None
    node = home.node_id()
    here = place_of(home)
    bound = _binding(home)
    if bound is None or bound == (node, here):
        return None
    return _explain(home, node, bound, here)


def adopt(home: Home) -> str:
    """This home is the runner its node id names (moved, or restored in place of a lost
    original that no longer runs): bind the id to it."""
    node = home.node_id()
    here = place_of(home)
    log.warning("node %s is bound to this home now: %s", node, here)
    _bind(home, node, here)
    return node


def renew(home: Home) -> str:
    """This home is a runner of its own: a new node id, bound to it. The runs the old id
    left claimed go back to ready when their leases end (any runner's rescue)."""
    old, node = home.node_id(), fresh_node_id()
    files.write(home.node_file, (node + "\n").encode())
    log.warning("this home was node %s; it is node %s now", old, node)
    _bind(home, node, place_of(home))
    return node


def _explain(home: Home, node: str, bound: tuple[str, Place], here: Place) -> str:
    made_for = bound[1] if bound[0] == node else f"another node id, {bound[0]}"
    return (
        f"{home.root} is not the home node id {node} was made for ({made_for}; this home is "
        f"{here}): it is a copy (a restored snapshot, cp, rsync) or it was moved. Two "
        "runners with one node id reclaim each other's runs and end each other's CLIs, so "
        "lane-runner will not run here as it is. If this home replaces that one (moved, or "
        "restored after a loss; it no longer runs anywhere), run 'lane-runner recover "
        "--adopt'; if it is a runner of its own, run 'lane-runner recover --new-node'"
    )


def _binding(home: Home) -> tuple[str, Place] | None:
    """The recorded node and place; None when there is none yet (or it is unreadable,
    logged: the home is bound again, as a home that predates the binding is)."""
    try:
        document = orjson.loads(files.read(home.node_binding_file, BINDING_BYTES))
        return document["node"], Place(document["path"], document["inode"])
    except FileNotFoundError:
        return None
    except (OSError, orjson.JSONDecodeError, KeyError, TypeError) as error:
        log.warning(
            "%s is unreadable (%s); binding the node id again", home.node_binding_file, error
        )
        return None


def _bind(home: Home, node: str, here: Place) -> None:
    document = {"node": node, "path": here.path, "inode": here.inode, "bound_at": time.time()}
    files.write(home.node_binding_file, orjson.dumps(document) + b"\n")
