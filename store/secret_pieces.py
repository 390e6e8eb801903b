"""A secret split across texts: finding its pieces when together they make it whole.

This module owns `covering_pieces`. A secret cut into pieces and written in several texts of one
write (the rows of one statement or batch, a trace row's fields, one line), in any order and among
any other text, is found when every character of its body (the shortest of its variants,
`secret_forms.variants`: what is left after its key prefixes) lies in a piece of at least
`min_piece_chars` characters found raw in one of the texts; the fewest such pieces that cover it
are then masked wherever they show (so a piece some text holds by chance, beside the whole secret
written elsewhere, is left alone). The minimum is what keeps ordinary text from being taken for
pieces: a piece must be unlikely to occur by chance, at least `PIECE_BITS` bits' worth of
characters drawn from the secret's alphabet (4 letters or digits of a mixed-case key, 5 hex digits,
7 decimal digits). Pieces shorter than that, pieces in other encodings and pieces written in
separate writes (two turns of a cycle, two log lines) are not found.
"""

from __future__ import annotations

import math
import string
from collections.abc import Sequence
from typing import Final

#: How unlikely a piece must be to occur by chance, in bits (see the module docstring).
PIECE_BITS: Final = 20
#: A piece is never shorter than this.
MIN_PIECE_CHARS: Final = 4
_ALPHABETS: Final = (
    frozenset(string.digits),
    frozenset(string.hexdigits.lower()),
    frozenset(string.hexdigits.upper() + string.digits),
    frozenset(string.ascii_lowercase + string.digits),
    frozenset(string.ascii_uppercase + string.digits),
    frozenset(string.ascii_letters + string.digits),
    frozenset(string.ascii_letters + string.digits + "-_"),
)


def min_piece_chars(body: str) -> int:
    """The shortest piece of `body` that is looked for: `PIECE_BITS` of its alphabet (the
    smallest of decimal digits, hex digits, lower or upper case letters and digits, letters and
    digits, printable ASCII, that holds all its characters)."""
    chars = set(body)
    size = next((len(a) for a in _ALPHABETS if chars <= a), len(string.printable))
    return max(MIN_PIECE_CHARS, math.ceil(PIECE_BITS / math.log2(size)))


def anchors(body: str, min_chars: int) -> tuple[str, str]:
    """What texts holding `body` in pieces hold: its first and its last `min_chars` characters
    (each lies in a piece at least that long)."""
    return body[:min_chars], body[-min_chars:]


def covering_pieces(body: str, texts: Sequence[str], min_chars: int) -> list[str] | None:
    """The fewest pieces of `body`, each at least `min_chars` long and found in one of `texts`,
    that cover every character of it (longest first); None when no pieces do.

    Each piece found is as long as it goes (it continues while the text goes on with `body`).
    Only the pieces the cover needs are given, so a piece of `body` that a text holds by chance
    (`word` of a password `pa55word-42`, written whole elsewhere) is not."""
    found: dict[tuple[int, int], str] = {}  # body span -> the piece
    for text in texts:
        for offset in range(len(body) - min_chars + 1):
            gram = body[offset : offset + min_chars]
            at = text.find(gram)
            while at != -1:
                # only a piece's first gram starts it: the piece extends from there
                if at == 0 or offset == 0 or text[at - 1] != body[offset - 1]:
                    length = min_chars
                    while (
                        offset + length < len(body)
                        and at + length < len(text)
                        and text[at + length] == body[offset + length]
                    ):
                        length += 1
                    found[offset, offset + length] = text[at : at + length]
                at = text.find(gram, at + 1)
    chosen: list[str] = []
    reached = 0
    while reached < len(body):
        starting = [span for span in found if span[0] <= reached < span[1]]
        if not starting:
            return None
        best = max(starting, key=lambda span: span[1])
        chosen.append(found[best])
        reached = best[1]
    return sorted(chosen, key=len, reverse=True)
