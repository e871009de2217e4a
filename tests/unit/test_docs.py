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
