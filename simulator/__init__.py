"""Local simulator of the Lium upstream API (cluster workflow), built on Werkzeug.

Start it with ``python -m simulator``; see ``simulator/README.md``.
"""

__version__ = "0.1.0"
