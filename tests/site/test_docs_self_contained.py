"""The repository carries its own design: nothing points outside it, and the README's map names real files."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
# A path outside the clone: the sibling design folder, or a build machine's absolute path (spelled in parts, so
# this file does not name them itself).
SIBLING, BUILD_ROOT = "shared", "work"
OUTSIDE = re.compile(rf"\.\./{SIBLING}/|(?<![\w.])/{BUILD_ROOT}/")


def tracked_text_files() -> list[Path]:
    listed = subprocess.run(["git", "ls-files"], cwd=REPO_ROOT, capture_output=True, text=True, check=True)
    suffixes = {".md", ".py", ".txt", ".html", ".yml", ".yaml", ".toml", ".cfg", ".sh", ""}
    return [REPO_ROOT / name for name in listed.stdout.splitlines() if Path(name).suffix in suffixes]


def test_no_file_points_outside_the_repository() -> None:
    offenders = []
    for path in tracked_text_files():
        if not path.is_file():
            continue
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if OUTSIDE.search(line):
                offenders.append(f"{path.relative_to(REPO_ROOT)}:{number}: {line.strip()[:100]}")
    assert offenders == [], "\n".join(offenders)


def test_the_readme_map_names_files_that_exist() -> None:
    readme = (REPO_ROOT / "README.md").read_text()
    section = readme[readme.index("## Architecture") : readme.index("## Layout")]
    assert "docs/architecture.md" in section
    named = set(re.findall(r"`((?:[a-z_]+/)+[a-z_*.]+\.(?:py|md|html))`", section))
    assert named, "the map names no file"
    missing = [name for name in sorted(named) if not list(REPO_ROOT.glob(name))]
    assert missing == [], f"the README's architecture map names files that do not exist: {missing}"
    assert len(section.splitlines()) <= 60, "the README's architecture section is a map of at most 60 lines"
