"""Subjects: what a memory states something about ("home city"), matched after normalisation.

A subject has at most one current memory per exact scope and kind, so two spellings
of one subject must meet: ``"Home  City"``, ``"home city"`` and ``"ＨＯＭＥ city"`` are
one subject. The matching form is NFKC (compatibility characters folded: full-width
letters, ligatures), case-folded (``casefold``, not ``lower``: ``"Straße"`` meets
``"STRASSE"``), with whitespace collapsed to single spaces and trimmed; it is the same
form ``core.codec.normalise`` gives fact subjects, so the facts mode and
``remember(subject=...)`` share one namespace of subjects.

Commas and any other printable characters are allowed: the subject is never a TAG
value. What the index holds is ``subject_digest`` of the matching form (hex), which
needs no escaping and has no separator to collide with; the text itself is stored
beside it for display and for ``fact_history``.

The bound (256 characters) applies to the matching form, which is what is stored and
compared (NFKC and case folding can lengthen a text: ``"ß"`` folds to ``"ss"``).
"""

from __future__ import annotations

import hashlib
import unicodedata

from ..errors import ValidationError

__all__ = ["MAX_SUBJECT_CHARS", "normalise_subject", "subject_digest"]

MAX_SUBJECT_CHARS = 256


def normalise_subject(subject: object, *, name: str = "subject") -> str:
    """The matching form of a subject: NFKC, case-folded, whitespace collapsed.

    Args:
        subject: the caller's subject text.
        name: the argument's name, for the error.

    Returns:
        The normalised text (1-256 characters).

    Raises:
        ValidationError: ``validation.type`` for a non-string, ``validation.empty``
            for a subject that is empty once normalised, ``validation.too_long``
            past 256 characters, ``validation.encoding`` for text that is not valid
            Unicode (a lone surrogate).
    """
    if not isinstance(subject, str):
        raise ValidationError(
            f"{name} must be a string, not {type(subject).__name__}",
            code="validation.type",
            details={"argument": name, "type": type(subject).__name__},
        )
    try:
        subject.encode("utf-8")
    except UnicodeEncodeError:
        raise ValidationError(
            f"{name} is not valid Unicode (lone surrogate)",
            code="validation.encoding",
            details={"argument": name},
        ) from None
    out = " ".join(unicodedata.normalize("NFKC", subject).casefold().split())
    if not out:
        raise ValidationError(
            f"{name} must not be empty", code="validation.empty", details={"argument": name}
        )
    if len(out) > MAX_SUBJECT_CHARS:
        raise ValidationError(
            f"{name} is {len(out)} characters once normalised; at most {MAX_SUBJECT_CHARS}",
            code="validation.too_long",
            details={"argument": name, "length": len(out), "max": MAX_SUBJECT_CHARS},
        )
    return out


def subject_digest(normalised: str) -> str:
    """20 hex digits naming a normalised subject in keys and in the index's TAG field.

    The same digest as ``core.facts.subject_digest`` (blake2b, 10 bytes), so a subject
    written by ``remember(subject=...)`` and one reconciled by the facts mode are one.
    """
    return hashlib.blake2b(normalised.encode(), digest_size=10).hexdigest()
