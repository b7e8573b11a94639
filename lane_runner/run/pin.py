"""A task's own model and skills against the route (issue 42). Pure.

A task may pin its model (``TaskSettings.model``: ``task add --model`` on our own
boards, Hermes's ``model_override``) and name skills (Hermes's ``skills``, which Hermes
force-loads into its worker). Neither is ever ignored without a word: a model the routed CLI runs
(``Provider.knows_model``) replaces the router's model and reaches that CLI's model
flag; one it does not run is not passed (the CLI would fail on it), and the run's
comment says so and which model ran instead. Neither CLI has a way to load a named
skill, so skills are named in the prompt (``prompt_section``) and in the comment.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from lane_runner.board.model import Task
from lane_runner.providers.registry import adapter
from lane_runner.router import Route


@dataclass(frozen=True)
class Asked:
    """What the task itself asks of the CLI that runs it."""

    model: str | None = None
    skills: tuple[str, ...] = ()


def asked_of(task: Task) -> Asked:
    return Asked(task.settings.model, task.skills)


@dataclass(frozen=True)
class Pinned:
    """The route as the task's pin leaves it, and what the run's comment says of it."""

    route: Route
    said: tuple[str, ...]


def pin(route: Route, asked: Asked) -> Pinned:
    """``route`` with the task's model when its CLI runs that model, else as it was."""
    said: list[str] = []
    if asked.model:
        cli = adapter(route.provider)
        if cli.knows_model(asked.model):
            route = replace(
                route, model=asked.model, reason=f"{route.reason} (model pinned by the task)"
            )
            said.append(f"model {asked.model}: pinned by the task, given to {route.provider}")
        else:
            said.append(
                f"model {asked.model} pinned by the task was not used: {route.provider} "
                f"runs only its own models (named {cli.model_prefix}...), so "
                f"{route.provider}/{route.model} ran; assign the task to a lane whose "
                "CLI runs that model"
            )
    if asked.skills:
        said.append(
            f"skills {', '.join(asked.skills)}: {route.provider} has no way to load a named "
            "skill; they are named in the prompt"
        )
    return Pinned(route, tuple(said))


def prompt_section(asked: Asked) -> str:
    """What the prompt says of the task's skills ("" when it names none)."""
    if not asked.skills:
        return ""
    named = ", ".join(asked.skills)
    return (
        f"## Skills\nThe task asks for these skills: {named}. This CLI cannot load them by "
        "name: apply the practice each one names as well as you know it."
    )
