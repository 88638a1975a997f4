"""The CheckList-syntax expander: unit behaviour and parity with checklist.editor.Editor().template."""

import pytest
import yaml

from physprobe.data.templates import expand, fill, slots
from physprobe.errors import TemplateError

from .conftest import UPSTREAM


def test_articles_follow_the_filled_word():
    assert fill("{a:x} and {an:y}", {"x": "owl", "y": "cat"}) == "an owl and a cat"
    assert fill("{a:x}", {"x": "Umbrella"}) == "an Umbrella"


def test_numbered_copies_are_distinct_draws_from_one_lexicon():
    rows = expand("{o1} {o2} {o3}", {"o": ["a", "b", "c"]})
    assert [row.data for row in rows] == ["a b c", "a c b", "b a c", "b c a", "c a b", "c b a"]
    assert len(expand("{o1} {o2}", {"o": ["a", "b", "c"]}, remove_duplicates=False)) == 9


def test_duplicates_are_removed_across_lexicons_too():
    # CheckList's remove_duplicates drops any fill repeating a value, whatever its lexicon.
    rows = expand("{x} {y}", {"x": ["a", "b"], "y": ["b", "c"]})
    assert [row.data for row in rows] == ["a b", "a c", "b c"]


def test_nested_templates_keep_their_shape_and_record_meta():
    rows = expand({"q": "{a:t}?", "opts": ["{t}", "no"]}, {"t": ["egg"]})
    assert rows[0].data == {"q": "an egg?", "opts": ["egg", "no"]}
    assert rows[0].meta == {"t": "egg"}


def test_slots_in_order_of_first_appearance():
    assert slots(["{b2} {a:a1}", "{b1} {b2}"]) == ["b2", "a1", "b1"]


def test_missing_lexicon_is_named():
    with pytest.raises(TemplateError, match="no lexicon for template key.*colour"):
        expand("{colour1} {size}", {"size": ["big"]})


def test_malformed_slot_is_reported():
    with pytest.raises(TemplateError, match="malformed slot"):
        expand("{unclosed and {x}", {"x": ["a"]})


def project_templates():
    """Every template in the project: the text fields of each PROST YAML entry."""
    lexicons = yaml.safe_load((UPSTREAM / "prost" / "globals" / "lexicons.yml").read_text())
    for path in sorted((UPSTREAM / "prost").glob("*.yml")):
        for entry in yaml.safe_load(path.read_text())["configs"]:
            text = {key: entry[key] for key in ("context", "question", "ex_question")}
            text.update(entry["choices"])
            yield pytest.param(text, lexicons, id=entry["name"])


@pytest.mark.parametrize("template, lexicons", list(project_templates()))
def test_parity_with_checklist(template, lexicons):
    from checklist import editor  # setup.sh installs checklist 0.0.11 for this test

    theirs = editor.Editor().template(template, remove_duplicates=True, meta=True, **lexicons)
    ours = expand(template, lexicons)

    def canonical(pairs):
        return sorted((sorted(data.items()), sorted(meta.items())) for data, meta in pairs)

    assert canonical((row.data, row.meta) for row in ours) == canonical(zip(theirs.data, theirs.meta))
