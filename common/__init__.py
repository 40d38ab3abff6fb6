"""Helpers that belong to no domain: rate limits, log context, metrics counters, client address.

Nothing here imports a model or another app of the project, so every app may import from here.
"""
