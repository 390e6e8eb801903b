"""JSON in a model's text answer: the one object an answer holds, fenced in a code block or not.

This module owns `json_object_in`, which the strategy writer, the rating report and the quality
judge read their answers with, and `FENCE`, the code-fence pattern the LLM client's tool-call
repair shares. It imports nothing of openbell's, so a command that only reads a stored rating
(the leaderboard) does not load the LLM client.
"""

from __future__ import annotations

import json
import re
from typing import Final

#: A whole answer in one code fence (any language tag); group 1 is its inside.
FENCE: Final = re.compile(r"^\s*```[a-zA-Z]*\s*\n?(.*?)\n?\s*```\s*$", re.DOTALL)


def json_object_in(text: str) -> object:
    """The JSON value from the first `{` to the last `}` of a model's answer `text` (the inside
    of a code fence, if the answer is one), None when there is no such span; json's `ValueError`
    when the span does not parse."""
    fenced = FENCE.match(text)
    body = fenced.group(1) if fenced else text.strip()
    start, end = body.find("{"), body.rfind("}")
    return json.loads(body[start : end + 1]) if 0 <= start < end else None
