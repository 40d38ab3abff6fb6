"""Verified rentals: the fabric check's record, its worker step and the two choices after a failed check.

records.py: the check row (key kept encrypted, figures) and its API shape; perform.py: the worker's step from
`verifying` to `ready` or `check_failed`; choices.py: keep the cluster unverified, or rent again without the slow
node(s). The SSH check itself is the library `rentals.fabric_check`.
"""
