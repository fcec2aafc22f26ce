"""docs/design.md (the core) and docs/design-frontends.md (the front ends) map the whole
package: one file table per package, each row naming files that exist, and every module of
x64guard/ named in exactly one row of the two pages. A module added, moved or deleted without
its row fails here, so the map a newcomer reads stays the tree."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "x64guard"
DESIGN_PAGES = (ROOT / "docs" / "design.md", ROOT / "docs" / "design-frontends.md")

# A package's table follows a heading that names its folder: "## `x64guard/passes/`: ...".
_HEADING = re.compile(r"^#{2,3} .*?`(x64guard/(?:[\w/]+/)?)`")
_ROW = re.compile(r"^\|\s*(?P<cell>[^|]*\.py[^|]*)\|")
_NAME = re.compile(r"`([\w/]+\.py)`")


def documented_files() -> list[str]:
    """Every file a table row names, as a path from the repository root, in order."""
    found: list[str] = []
    folder = None
    for line in (line for page in DESIGN_PAGES for line in page.read_text().splitlines()):
        heading = _HEADING.match(line)
        if heading:
            folder = heading.group(1)
            continue
        if line.startswith("#"):
            folder = None
            continue
        row = _ROW.match(line)
        if row and folder:
            found += [folder + name for name in _NAME.findall(row.group("cell"))]
    return found


def package_files() -> set[str]:
    return {str(path.relative_to(ROOT)) for path in PACKAGE.rglob("*.py")}


def test_every_module_of_the_package_has_one_row_in_design_md():
    documented = documented_files()
    twice = {name for name in documented if documented.count(name) > 1}
    missing = package_files() - set(documented)
    assert not twice, f"named in more than one row of the design pages: {sorted(twice)}"
    assert not missing, f"modules the design pages do not map: {sorted(missing)}"


def test_every_row_of_design_md_names_a_file_that_exists():
    stale = set(documented_files()) - package_files()
    assert not stale, f"the design pages name files that are not in x64guard/: {sorted(stale)}"


def test_the_reader_finds_the_tables():
    # The check above would pass vacuously if the headings changed shape.
    assert len(documented_files()) >= len(package_files())
    for page in DESIGN_PAGES:     # each page holds tables the reader finds
        assert any(_HEADING.match(line) for line in page.read_text().splitlines()), page
