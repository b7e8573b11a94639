"""Benchmarks: every figure is a ratio against a baseline measured in the same run.

The machines these run on are shared and noisy, so an absolute time alone says
little; the same work done by the physical floor (a bare loop), by a peer (Huey)
or by a naive design (poll every 5 s) on the same machine a moment earlier says
a lot. ``python -m bench`` runs them all and writes ``BENCHMARKS.md`` and plots.
"""
