"""Notifications: what the board's events mean to the people who asked to hear of them,
kept in the board's outbox and sent through Apprise (docs/notifications.md)."""
