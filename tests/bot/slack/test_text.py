"""Text cleaned where it enters the bot (`bot.slack.text`): what no database takes goes, the rest stays."""

from __future__ import annotations

import json

from bot.slack.text import clean_payload, readable


def test_a_nul_is_dropped_and_a_lone_surrogate_shown_as_the_replacement_character():
    assert readable("a\x00b \ud800c \udfff") == "ab \ufffdc \ufffd"
    assert readable("코드 리뷰 😀") == "코드 리뷰 😀"  # a surrogate pair JSON carried is one character
    assert readable(json.loads('"\\ud83d\\ude00"')) == "😀"


def test_a_payload_is_cleaned_in_place_keys_and_nested_lists_included():
    sent = '{"event": {"text": "hi\\u0000", "blocks": [{"t": "x\\ud800"}], "k\\u0000": 1}, "n": 2}'
    body = json.loads(sent)
    event = body["event"]  # Bolt hands listeners this very object
    assert clean_payload(body) is body
    assert event == {"text": "hi", "blocks": [{"t": "x\ufffd"}], "k": 1}
    assert body["n"] == 2
    json.dumps(body, ensure_ascii=False).encode()  # every string encodes now
