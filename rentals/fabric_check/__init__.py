"""The fabric check: before hand-over, a worker connects to every member over SSH with a key of its own,
runs the interconnect all-reduce across all nodes, compares the bus bandwidth with the fabric's floor, finds slow
members pairwise when it is under, then removes its key. A library: no states, no UI (they build on it).

commands.py: the exact commands (all that runs on customers' nodes); parse.py: reading figures; keys.py: the
check's key pair; pairwise.py: naming the slow members; runner.py: the SSH sessions and the result.
"""
