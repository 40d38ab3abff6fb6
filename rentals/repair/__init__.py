"""Member repair (Reboot member, Reset GPUs): services.py records the clicks a customer or operator makes;
calls.py is the worker's side, the upstream calls and how each request ends.
"""
