"""``doctor``'s checks of the people in the loop: every ``notify`` URL is one Apprise
knows, and the approval code's secret file is there and private (docs/notifications.md,
docs/approvals.md). A URL is named by its board, place and hash, never shown."""

from __future__ import annotations

from lane_runner.cli.checks import Check, Level
from lane_runner.config import Config, people
from lane_runner.errors import UsageError
from lane_runner.notifications import sender
from lane_runner.service import approvals


def people_checks(cfg: Config) -> list[Check]:
    return [*_notify_checks(cfg), *_totp_checks(cfg)]


def _notify_checks(cfg: Config) -> list[Check]:
    if not cfg.notify:
        return []
    if not sender.available():
        return [Check("notifications", Level.FAIL, "notify is configured, Apprise is not "
                      "installed", sender.install_hint())]
    import apprise

    checks = []
    for board, entry in cfg.notify.items():
        for number, url in enumerate(entry["urls"]):
            name = f"notify.{board}.urls[{number}]"
            if apprise.Apprise().add(url):
                checks.append(Check(name, Level.PASS, f"{people.shown_url(url)}: Apprise knows it"))
            else:
                checks.append(Check(name, Level.FAIL, f"{people.shown_url(url)}: not a URL "
                                    "Apprise knows", "see https://github.com/caronc/apprise/wiki"))
    return checks


def _totp_checks(cfg: Config) -> list[Check]:
    if cfg.approval_totp_file is None:
        return []
    try:
        approvals.authenticator(cfg.approval_totp_file)
    except UsageError as error:
        return [Check("approval code", Level.FAIL, str(error), "fix approval_totp_file")]
    return [Check("approval code", Level.PASS, f"{cfg.approval_totp_file} holds a private "
                  "base32 secret")]
