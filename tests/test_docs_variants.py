"""The docs' variant counts and names come from the code (issue 42, "pictures and pages").

synth's variants are ``homog.synth.selection.VARIANTS`` (the paper's four) and, with
``synth.position.enabled``, ``homog.synth.position.family_names`` of params.yaml's positions.
Every "<number> variants" a page states is that count, or one of the listed exceptions (each
with its own number from the code where it has one); a page that states the count names every
variant. The tutorial said four variants after the position family made eight.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from homog.config import load_config
from homog.store.query import VARIANT_ORDER
from homog.synth.selection import VARIANTS
from homog.variants import family_names

ROOT = Path(__file__).resolve().parents[1]
WORDS = {"two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8}
WORDS |= {"nine": 9, "ten": 10, "eleven": 11, "twelve": 12}
COUNT = re.compile(
    r"\b(" + "|".join(WORDS) + r"|\d+)(?:[ -]+(?:positional|synth|text|paper's))?\s+variants\b",
    re.IGNORECASE,
)
# (page, the words around the count): the number it states, or None (a measured set-up, not
# synth's output), and why it is not synth's default count
EXCEPTIONS: dict[tuple[str, str], tuple[int | None, str]] = {
    ("docs/variants.md", "the paper's four variants only"): (
        len(VARIANTS),
        "synth.position.enabled: false",
    ),
    ("docs/synth.md", "from the paper's four variants"): (
        len(VARIANTS),
        "BERTScore's revert acts on the paper's variants",
    ),
    ("docs/synth.md", "its three variants); a variant identical"): (
        len(VARIANTS) - 1,
        "the rewritten variants BERTScore embeds (front, end, control)",
    ),
    ("docs/statistics.md", "(5 variants x 5 metrics"): (None, "a cost on synthetic data"),
}


def synth_variants() -> list[str]:
    """The variants synth writes with the project's params.yaml."""
    position = load_config(ROOT / "params.yaml").synth.position
    return [*VARIANTS, *(family_names(position.positions) if position.enabled else [])]


def pages() -> list[Path]:
    """README and every docs page but the changelog (history: it states old counts)."""
    docs = sorted(p for p in (ROOT / "docs").rglob("*.md") if p.name != "changelog.md")
    return [ROOT / "README.md", *docs]


def counts(text: str) -> list[tuple[int, str]]:
    """(number, the line around it) of every "<number> variants" in text."""
    out = []
    for m in COUNT.finditer(text):
        word = m.group(1).lower()
        start = text.rfind("\n", 0, m.start()) + 1
        end = text.find("\n", m.end())
        out.append((WORDS.get(word) or int(word), text[start : end if end >= 0 else None]))
    return out


def test_the_variant_list_is_one_list() -> None:
    names = synth_variants()
    assert len(names) == 11 and len(set(names)) == len(names)
    # the store's display order (the registry's) has the same names in the same order
    assert [v for v in VARIANT_ORDER if v in names] == names


def test_every_stated_variant_count_is_the_codes() -> None:
    n = len(synth_variants())
    seen, wrong = set(), []
    for page in pages():
        rel = page.relative_to(ROOT).as_posix()
        for stated, line in counts(page.read_text(encoding="utf-8")):
            hit = [k for k in EXCEPTIONS if k[0] == rel and k[1] in line]
            if hit:
                seen.update(hit)
                want = EXCEPTIONS[hit[0]][0]
                if want is not None and stated != want:
                    wrong.append(f"{rel}: states {stated}, the code has {want}: {line.strip()}")
            elif stated != n:
                wrong.append(f"{rel}: states {stated} variants, synth makes {n}: {line.strip()}")
    assert not wrong, "\n".join(wrong)
    assert seen == set(EXCEPTIONS), f"exceptions no page has any more: {set(EXCEPTIONS) - seen}"


@pytest.mark.parametrize("page", ["README.md", "docs/tutorial.md", "docs/synth.md"])
def test_pages_that_state_the_count_name_every_variant(page: str) -> None:
    text = (ROOT / page).read_text(encoding="utf-8")
    n = len(synth_variants())
    assert any(stated == n for stated, _ in counts(text)), f"{page} no longer states the count"
    missing = [v for v in synth_variants() if not re.search(rf"\b{v}\b", text)]
    assert not missing, f"{page} states {n} variants but does not name {missing}"


def test_the_count_pattern_reads_words_and_digits() -> None:
    assert counts("into four variants: a\nand 10 runs x 8 variants = 80") == [
        (4, "into four variants: a"),
        (8, "and 10 runs x 8 variants = 80"),
    ]
    assert counts("the eight positional variants") == [(8, "the eight positional variants")]
