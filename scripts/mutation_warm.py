"""What makes each mutant's forked test run start fast, without changing what it runs (used by scripts/mutation.py).

A child used to spend most of its ~7 s importing and compiling: nothing of the virtual environment has bytecode
(uv installs none) and the run must write none beside the project's sources (a mutant's bytecode could be taken
for the real module's). So, once per run, in the parent:
- every third-party module a test run imports is imported (the list is written by this module as a pytest plugin
  during the coverage run), so a child imports only the project;
- the project's modules and tests are compiled into a private bytecode folder, checked by the source's hash: a
  child loads the unchanged modules from it and compiles the mutated one afresh (its hash differs; nothing is
  written);
- Django's settings are read (they import nothing the mutants touch), so the libraries that read them at import
  (django-ninja) are imported here too;
- the test database is made once, migrated, and copied for each child: no child migrates, and none sees what an
  earlier child left (one stopped mid-test by the timeout, say);
- the garbage collector is told that everything alive now is permanent, so pytest's collections at the end of a
  child walk only what the child made.

    pytest -p mutation_warm ...     # with MUTATION_WARM_FILE set: writes the third-party modules loaded
"""

from __future__ import annotations

import compileall
import contextlib
import gc
import importlib
import io
import os
import py_compile
import shutil
import sys
import warnings
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
VENV = ROOT / ".venv"
# The project modules reading the settings imports: none of them imports a module that is mutated.
SETTINGS_MODULES = {"dashboard", "dashboard.celery", "dashboard.env", "dashboard.settings", "dashboard.settings_apps"}


def third_party(module: Any) -> bool:
    """Whether a loaded module comes from outside the project (the standard library or the virtual environment)."""
    filename = getattr(module, "__file__", None)
    if not filename:
        return False
    path = Path(filename).resolve()
    return not path.is_relative_to(ROOT) or path.is_relative_to(VENV)


def pytest_sessionfinish(session: Any) -> None:
    """Add the third-party modules this test run loaded to MUTATION_WARM_FILE (a union: runs may append)."""
    target = os.environ.get("MUTATION_WARM_FILE")
    if not target:
        return
    path = Path(target)
    names = set(path.read_text().split()) if path.exists() else set()
    names |= {name for name, module in list(sys.modules.items()) if third_party(module) and name != "__main__"}
    path.write_text("".join(f"{name}\n" for name in sorted(names)))


def warm(modules_file: Path, pycache: Path, project_dirs: list[str]) -> None:
    """Import the listed third-party modules and compile the project into `pycache`; then freeze what is alive."""
    sys.pycache_prefix = str(pycache)
    for folder in project_dirs:
        compileall.compile_dir(
            ROOT / folder, quiet=2, invalidation_mode=py_compile.PycInvalidationMode.CHECKED_HASH, workers=1
        )
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dashboard.settings")
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))  # as pytest-django does for manage.py's folder
    from django.conf import settings

    settings.INSTALLED_APPS  # noqa: B018 - read now, in the parent, like the libraries below
    before = set(sys.modules)
    # Third-party bytecode may be cached (into `pycache`): those files never change during a run, and every
    # project module found here has its hash-checked bytecode already, so none of it is written.
    sys.dont_write_bytecode = False
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        for name in modules_file.read_text().split() if modules_file.exists() else []:
            # Some need Django set up (models, the admin): those the child imports itself.
            with contextlib.suppress(Exception):
                importlib.import_module(name)
    sys.dont_write_bytecode = True
    # Nothing of the project may be imported here: the child must import every module that could see a mutant.
    for name in set(sys.modules) - before - SETTINGS_MODULES:
        if not third_party(sys.modules[name]):
            del sys.modules[name]
    gc.collect()
    gc.freeze()


def test_database_template(template: Path) -> Path:
    """Make the test database afresh (in a child: Django is set up there) and keep a copy of it in `template`.
    Return the test database's path, which `test_database_copy` overwrites with the template before each child."""
    from django.conf import settings

    database = Path(settings.DATABASES["default"]["TEST"]["NAME"])
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            import django
            from django.db import connections
            from django.test.utils import setup_databases

            django.setup()
            with contextlib.redirect_stdout(io.StringIO()):
                setup_databases(verbosity=0, interactive=False, keepdb=False)
            connections.close_all()  # the last connection out folds the write-ahead log into the file
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0 or not database.exists():
        sys.exit(f"Could not make the test database {database}")
    shutil.copyfile(database, template)
    return database


def test_database_copy(template: Path, database: Path) -> None:
    """Give the next child a test database exactly as migrated (SQLite: the file, without a stale log)."""
    for leftover in (Path(f"{database}-wal"), Path(f"{database}-shm")):
        leftover.unlink(missing_ok=True)
    shutil.copyfile(template, database)
