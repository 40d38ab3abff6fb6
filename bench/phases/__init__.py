"""The bench's measurements, one module a phase; each imports models, so only once Django is set up."""
