"""Django's SQLite backend, with this process's write transactions taken in turn (see `base`)."""
