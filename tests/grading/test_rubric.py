import json

import pytest
from pydantic import ValidationError

from grading.rubric import (
    MAX_CRITERIA,
    MAX_RUBRIC_CHARS,
    MAX_YAML_DEPTH,
    Rubric,
    RubricError,
    normalize_name,
    parse_rubric,
)

SEED_YAML = """\
dimensions:
  - name: Correctness
    description: Are the facts right?
    weight: 0.5
    fail_below: 3
    anchors:
      5: |
        All facts are right.
      3: Minor slips that do not mislead.
      1: Contains false information.
  - name: Completeness
    weight: 0.2
    anchors: {"5": Nothing missing., "3": Some gaps., "1": More than half missing.}
  - name: Clarity
    weight: 0.15
    anchors: {5: Understood on first read., 3: Needs a re-read., 1: Incomprehensible.}
  - name: Tone
    weight: 0.15
    anchors: {5: Polite and professional., 3: Flat., 1: Rude.}
aggregation: weighted
pass_score: 4
"""


def yaml_dims(*dims: str, extra: str = "") -> str:
    """A YAML rubric whose dimensions are given as their indented body lines."""
    body = "".join(f"  - {d}\n" for d in dims)
    return f"dimensions:\n{body}{extra}"


def error_of(text: str) -> str:
    with pytest.raises(RubricError) as info:
        parse_rubric(text)
    return str(info.value)


# --- list rubrics -----------------------------------------------------------------------------


def test_list_rubric_strips_every_bullet_style_and_keeps_order():
    rubric = parse_rubric(
        "- The poem has three lines\n"
        "* Lines follow a 5-7-5 syllable pattern\n"
        "• The theme is spring\n"
        "1. It rhymes\n"
        "2) It has a title\n"
        "A plain line counts too\n"
    )
    assert rubric.kind == "list"
    assert not rubric.is_scored
    assert rubric.names == [
        "The poem has three lines",
        "Lines follow a 5-7-5 syllable pattern",
        "The theme is spring",
        "It rhymes",
        "It has a title",
        "A plain line counts too",
    ]
    assert rubric.dimensions == ()
    assert rubric.weights() == {}


def test_markdown_headings_are_skipped_but_hash_words_are_criteria():
    rubric = parse_rubric("# Haiku rubric\n## Form\n- Three lines\n#hashtag is used\n")
    assert rubric.names == ["Three lines", "#hashtag is used"]


def test_numbers_that_are_not_bullets_stay_in_the_criterion():
    rubric = parse_rubric("1.5 litres are mentioned\n-5 degrees is called cold\n")
    assert rubric.names == ["1.5 litres are mentioned", "-5 degrees is called cold"]


def test_blank_lines_and_lone_bullets_are_ignored_and_text_is_stripped():
    rubric = parse_rubric("\n\n  - First\n-\n\n   Second  \n\n")
    assert rubric.names == ["First", "Second"]
    assert rubric.text == "- First\n-\n\n   Second"


@pytest.mark.parametrize("text", ["", "   \n\t\n", "-\n*\n•\n1.\n"])
def test_empty_rubric_is_an_error(text):
    assert error_of(text).startswith("rubric is empty")


@pytest.mark.parametrize(
    "text",
    [
        "[" * 1000 + "]" * 1000,
        "dimensions: " + "[" * 1000 + "]" * 1000,
        "{a: " * 500 + "1" + "}" * 500,
        "- " * 1000 + "x",
    ],
)
def test_deeply_nested_yaml_is_one_clear_error_not_a_crash(text):
    message = error_of(text)
    assert f"nests more than {MAX_YAML_DEPTH} levels deep" in message and "\n" not in message


def test_a_colon_line_that_is_not_a_yaml_rubric_is_a_criterion():
    rubric = parse_rubric("Correctness: the facts are right\nTone: polite")
    assert rubric.kind == "list"
    assert rubric.names == ["Correctness: the facts are right", "Tone: polite"]


def test_too_long_rubric_names_its_size_and_the_limit():
    message = error_of("x" * (MAX_RUBRIC_CHARS + 1))
    assert f"{MAX_RUBRIC_CHARS + 1:,}" in message
    assert f"{MAX_RUBRIC_CHARS:,}" in message


def test_too_many_criteria_names_the_first_line_over_the_limit():
    text = "# Title\n" + "".join(f"- criterion {i}\n" for i in range(MAX_CRITERIA + 1))
    message = error_of(text)
    assert message.startswith(f"line {MAX_CRITERIA + 2}:")
    assert str(MAX_CRITERIA) in message
    assert len(parse_rubric("".join(f"- c{i}\n" for i in range(MAX_CRITERIA))).names) == 30


def test_duplicate_criteria_are_a_warning_naming_the_criterion():
    rubric = parse_rubric("- Mentions spring\n- mentions spring.\n- Three lines")
    assert rubric.names == ["Mentions spring", "mentions spring.", "Three lines"]
    assert len(rubric.warnings) == 1
    assert "“Mentions spring” appears more than once" in rubric.warnings[0]


def test_clean_list_rubric_has_no_warnings():
    assert parse_rubric("- a\n- b").warnings == ()


# --- scored (YAML) rubrics --------------------------------------------------------------------


def test_seed_yaml_rubric_parses_dimensions_anchors_and_settings():
    rubric = parse_rubric(SEED_YAML)
    assert rubric.kind == "scored"
    assert rubric.is_scored
    assert rubric.names == ["Correctness", "Completeness", "Clarity", "Tone"]
    correctness = rubric.dimensions[0]
    assert correctness.fail_below == 3
    assert correctness.description == "Are the facts right?"
    assert correctness.anchors == {
        1: "Contains false information.",
        3: "Minor slips that do not mislead.",
        5: "All facts are right.",
    }
    assert rubric.dimensions[1].anchors[5] == "Nothing missing."  # "5" string keys become ints
    assert rubric.aggregation == "weighted"
    assert rubric.pass_score == 4.0
    assert rubric.weights() == pytest.approx(
        {"Correctness": 0.5, "Completeness": 0.2, "Clarity": 0.15, "Tone": 0.15}
    )
    assert rubric.warnings == ()
    assert rubric.criteria == ()


def test_yaml_defaults_are_weighted_aggregation_and_pass_score_4():
    rubric = parse_rubric(yaml_dims("name: A", "name: B"))
    assert (rubric.aggregation, rubric.pass_score) == ("weighted", 4.0)
    assert rubric.dimensions[0].weight is None
    assert rubric.dimensions[0].fail_below is None


def test_comment_lines_before_dimensions_still_make_a_yaml_rubric():
    rubric = parse_rubric("# support bot rubric\n---\n" + yaml_dims("name: A"))
    assert rubric.kind == "scored"


def test_unset_weights_are_equal():
    rubric = parse_rubric(yaml_dims("name: A", "name: B", "name: C", "name: D"))
    assert rubric.weights() == pytest.approx({"A": 0.25, "B": 0.25, "C": 0.25, "D": 0.25})


def test_given_weights_are_relative():
    rubric = parse_rubric(yaml_dims("{name: A, weight: 2}", "{name: B, weight: 1}", "{name: C, weight: 1}"))
    assert rubric.weights() == pytest.approx({"A": 0.5, "B": 0.25, "C": 0.25})


def test_missing_weights_share_what_the_given_ones_leave():
    rubric = parse_rubric(yaml_dims("{name: A, weight: 0.5}", "{name: B}", "{name: C}"))
    assert rubric.weights() == pytest.approx({"A": 0.5, "B": 0.25, "C": 0.25})


def test_missing_weights_with_nothing_left_is_an_error_naming_them():
    message = error_of(yaml_dims("{name: A, weight: 1}", "{name: B}"))
    assert message.startswith("dimensions:")
    assert "B" in message


def test_all_zero_weights_are_an_error():
    assert "all zero" in error_of(yaml_dims("{name: A, weight: 0}", "{name: B, weight: 0}"))


@pytest.mark.parametrize(
    ("dims", "extra", "expected"),
    [
        (
            ["name: Correctness\n    anchors: {5: good, 4: fine, 1: bad}"],
            "",
            "dimensions[0] (Correctness).anchors: anchor 4 is not allowed; use 1, 3 and 5",
        ),
        (
            ["name: A", "name: Tone\n    anchors: {7: wow}"],
            "",
            "dimensions[1] (Tone).anchors: anchor 7 is not allowed",
        ),
        (["name: A\n    anchors: {5: '  '}"], "", "dimensions[0] (A).anchors: anchor 5 is empty"),
        (["name: A\n    fail_below: 6"], "", "dimensions[0] (A).fail_below:"),
        (["name: A\n    fail_below: 0"], "", "dimensions[0] (A).fail_below:"),
        (["name: A\n    weight: -1"], "", "dimensions[0] (A).weight:"),
        (["name: A\n    weight: .inf", "name: B\n    weight: 1"], "", "dimensions[0] (A).weight:"),
        (["name: A\n    colour: red"], "", "dimensions[0] (A).colour: unknown key"),
        (["weight: 1"], "", "dimensions[0].name:"),
        (["name: '  '"], "", "dimensions[0].name:"),
        (["name: A"], "pass_score: 7\n", "pass_score:"),
        (["name: A"], "pass_score: 0.5\n", "pass_score:"),
        (["name: A"], "aggregation: mean\n", "aggregation:"),
    ],
)
def test_invalid_yaml_fields_name_the_field_at_fault(dims, extra, expected):
    assert expected in error_of(yaml_dims(*dims, extra=extra))


def test_unknown_aggregation_lists_the_allowed_ones():
    message = error_of(yaml_dims("name: A", extra="aggregation: mean\n"))
    assert all(name in message for name in ("weighted", "min", "per_dimension"))


def test_unknown_top_level_key_is_named():
    message = error_of(yaml_dims("name: A", extra="threshold: 3\n"))
    assert "'threshold'" in message
    assert "dimensions, aggregation, pass_score" in message


@pytest.mark.parametrize("text", ["dimensions: []", "dimensions:\n"])
def test_a_yaml_rubric_needs_dimensions(text):
    assert error_of(text).startswith("dimensions:")


def test_yaml_syntax_error_reports_its_line():
    text = "dimensions:\n  - name: A\n   weight: 1\n"
    message = error_of(text)
    assert message.startswith("line 3:")
    assert "YAML" in message


def test_too_many_dimensions_is_an_error():
    dims = [f"name: D{i}" for i in range(MAX_CRITERIA + 1)]
    assert str(MAX_CRITERIA) in error_of(yaml_dims(*dims))


def test_duplicate_dimension_names_are_an_error_since_scores_are_keyed_by_name():
    message = error_of(yaml_dims("name: Clarity", "name: clarity."))
    assert message.startswith("dimensions:")
    assert "Clarity" in message


def test_more_than_five_dimensions_warns():
    rubric = parse_rubric(yaml_dims(*[f"name: D{i}\n    anchors: {{1: a, 3: b, 5: c}}" for i in range(6)]))
    assert rubric.warnings == (
        "The rubric has 6 dimensions; keep it to 3–5 so the grader scores each one consistently.",
    )


def test_missing_anchors_warn_naming_the_dimension_and_the_scores():
    rubric = parse_rubric(
        yaml_dims(
            "name: Tone\n    anchors: {5: polite}",
            "name: Clarity",
            "name: Full\n    anchors: {1: a, 3: b, 5: c}",
        )
    )
    assert len(rubric.warnings) == 2
    assert rubric.warnings[0].startswith("Dimension “Tone” has no anchor for 1 and 3;")
    assert rubric.warnings[1].startswith("Dimension “Clarity” has no anchors;")


# --- names, serialisation ---------------------------------------------------------------------


@pytest.mark.parametrize("returned", ["Correctness", "  correctness ", "CORRECTNESS.", "Correctness!?"])
def test_match_name_ignores_case_whitespace_and_trailing_punctuation(returned):
    assert parse_rubric(SEED_YAML).match_name(returned) == "Correctness"


def test_match_name_returns_none_for_unknown_names():
    rubric = parse_rubric("- The theme is spring")
    assert rubric.match_name("The theme is summer") is None
    assert rubric.match_name("the theme  is spring.") == "The theme is spring"


def test_normalize_name():
    assert normalize_name("  Lines follow   5-7-5. ") == "lines follow 5-7-5"
    # Compatibility forms, non-breaking and zero-width characters, decomposed accents.
    assert normalize_name("ﬁrst\u00a0line\u200d!") == normalize_name("First line")
    assert normalize_name("Cafe\u0301") == normalize_name("café") == "café"
    assert normalize_name("Is it (really) true?") == "is it (really) true"


def test_rubrics_round_trip_through_json():
    for text in (SEED_YAML, "- a\n- b"):
        rubric = parse_rubric(text)
        json.dumps(rubric.model_dump())
        assert Rubric.model_validate_json(rubric.model_dump_json()) == rubric
        assert Rubric.model_validate(json.loads(json.dumps(rubric.model_dump()))) == rubric


def test_rubrics_are_frozen():
    rubric = parse_rubric(SEED_YAML)
    with pytest.raises(ValidationError):
        rubric.pass_score = 1  # type: ignore[misc]
    with pytest.raises(ValidationError):
        rubric.dimensions[0].weight = 1  # type: ignore[misc]


def test_rubric_error_is_a_value_error():
    assert issubclass(RubricError, ValueError)
