"""The README fits two screens and points into docs/; each docs page starts with the command it is about."""

import re

from tests.conftest import ROOT

README = (ROOT / "README.md").read_text()
PAGES = sorted((ROOT / "docs").glob("*.md"))


def test_readme_fits_two_screens_and_shows_the_two_fresh_machine_commands():
    assert len(README.splitlines()) <= 150
    for command in ("make demo", "make test", "make doctor", "make image", "make train"):
        assert command in README, command


def test_the_readme_recipe_table_lists_every_shipped_recipe():
    table = {m.group(1) for m in re.finditer(r"^\| `([\w.-]+)` \|", README, re.MULTILINE)}
    shipped = {p.stem for p in (ROOT / "recipes").glob("*.yaml")}
    assert shipped == table


def test_every_docs_link_resolves_and_every_page_is_indexed():
    linked = set()
    for page in [ROOT / "README.md", *PAGES]:
        for target in re.findall(r"\]\(((?:docs/)?[\w.-]+\.md)(?:#[\w-]+)?\)", page.read_text()):
            path = (page.parent / target).resolve()
            assert path.is_file(), f"{page.name} links to {target}, which does not exist"
            linked.add(path)
    indexed = {(ROOT / t).resolve() for t in re.findall(r"\]\((docs/[\w.-]+\.md)\)", README)}
    assert set(PAGES) <= indexed, f"not in the README's index: {sorted(p.name for p in set(PAGES) - indexed)}"


def test_every_docs_anchor_names_a_heading():
    def anchor(heading: str) -> str:  # GitHub's slug: lower case, punctuation dropped, spaces to dashes
        return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")

    anchors = {p.name: {anchor(h) for h in re.findall(r"^#+ (.+)$", p.read_text(), re.MULTILINE)} for p in PAGES}
    for page in [ROOT / "README.md", *PAGES]:
        for name, frag in re.findall(r"\]\((?:docs/)?([\w.-]+\.md)#([\w-]+)\)", page.read_text()):
            assert frag in anchors[name], f"{page.name}: {name}#{frag} names no heading"


def test_each_page_starts_with_the_command_it_is_about():
    for page in PAGES:
        lines = page.read_text().splitlines()
        assert lines[0].startswith("# ") and "`" in lines[0], f"{page.name}: the title names no command"
        assert "```" in lines[2], f"{page.name}: the commands come right after the title"


def _code(text: str) -> str:
    """The README's or a page's commands: fenced blocks and `inline code`, not prose ("would make it stop")."""
    return "\n".join(re.findall(r"```.*?```|`[^`\n]+`", text, re.DOTALL))


MAKEFILES = [ROOT / "Makefile", *sorted((ROOT / "mk").glob("*.mk"))]
TARGETS = {t for f in MAKEFILES for t in re.findall(r"^([a-z][\w-]*):", f.read_text(), re.MULTILINE)}
# Targets a page may name before they exist (none now: `make eval` has landed).
NOT_YET: set[str] = set()


def test_every_make_target_the_docs_name_exists():
    for page in [ROOT / "README.md", *PAGES]:
        named = set(re.findall(r"\bmake ([a-z][\w-]*)", _code(page.read_text())))
        assert named <= TARGETS | NOT_YET, f"{page.name} names make targets that do not exist: {named - TARGETS}"


def test_every_recipe_the_docs_name_is_shipped_or_made_by_a_command_they_show():
    codes = {page.name: _code(page.read_text()) for page in [ROOT / "README.md", *PAGES]}
    known = {p.stem for p in (ROOT / "recipes").glob("*.yaml")}
    known |= {name for code in codes.values() for name in re.findall(r"\bTO=([\w.-]+)", code)}  # make copy/import
    for page, code in codes.items():
        named = set(re.findall(r"\bRECIPE=([\w.-]+)", code)) | set(re.findall(r"\brecipes/([\w.-]+)\.yaml", code))
        assert named <= known, f"{page} names recipes that are neither shipped nor made by make copy/import: {named - known}"
