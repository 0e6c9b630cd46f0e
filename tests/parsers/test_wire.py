"""``wire.loads``: the depth bound holds whether or not the cleaning walk runs.

Most documents (every streamed event) skip the walk because their brackets alone bound their
depth; these pin the bound at exactly ``MAX_DEPTH`` on both sides of that shortcut.
"""

from __future__ import annotations

import pytest

from doctor.foundation import wire


@pytest.mark.parametrize("padding", ["", ", ".join(['"[[[["'] * 30)])  # brackets inside strings: the walk runs
def test_nesting_at_the_bound_is_read_and_one_deeper_is_refused(padding):
    def nested(depth: int) -> str:
        return '{"a": ' * (depth - 1) + f'[{padding or "1"}]' + "}" * (depth - 1)

    assert wire.loads(nested(wire.MAX_DEPTH)) is not None
    with pytest.raises(wire.WireError, match="deeper"):
        wire.loads(nested(wire.MAX_DEPTH + 1))


def test_a_surrogate_escape_is_cleaned_in_a_shallow_event():
    event = wire.loads(b'{"choices": [{"delta": {"content": "\\ud800x"}}]}')
    assert event["choices"][0]["delta"]["content"] == "\ufffdx"
