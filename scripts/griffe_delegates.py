"""A griffe extension: methods that the classes assemble at import are documented as methods.

``MemoryStore.recall = _Delegate("_recall", Recall.recall)`` makes ``store.recall`` the
part's own method at run time (signature, docstring, types), but a static reader such as
griffe sees a class attribute with no docstring, and the API reference would lose the
store's main methods. This extension, loaded by mkdocstrings (mkdocs.yml), replaces each
such attribute with a copy of the function it names, so the reference shows exactly what
``help(MemoryStore.recall)`` shows. The blocking twins (``SyncMemoryStore.recall =
_blocking(MemoryStore.recall)``, spelled out under ``TYPE_CHECKING`` in ``sync.py``) are
copied the same way, without the ``async``. It reads the code's own structure, so a method
moved to another part is followed with no change here, and a wrapper it does not know is
left as it is.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

DELEGATE = re.compile(r"^_Delegate\(\s*['\"]\w+['\"]\s*,\s*(?P<target>[\w.]+)\s*\)$")
BLOCKING = re.compile(
    r"^_(?P<kind>blocking|on_loop|constructor|forward|forward_settable)\((?P<target>[\w.]+)\)$"
)


class DelegatedMethods(griffe.Extension):
    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        classes = _classes(pkg)
        for pattern in (DELEGATE, BLOCKING):  # the sync twins copy the delegated methods
            for cls in classes:
                _replace(pkg, cls, pattern)


def _replace(pkg: griffe.Module, cls: griffe.Class, pattern: re.Pattern[str]) -> None:
    for name, member in list(cls.members.items()):
        if member.is_alias or not member.is_attribute or member.value is None:
            continue
        m = pattern.match(str(member.value))
        if not m:
            continue
        sync = "kind" in pattern.groupindex
        head, _, rest = m["target"].partition(".")
        module = cls.module
        target_path = module.imports.get(head, f"{module.path}.{head}") + (f".{rest}" if rest else "")
        try:
            target = pkg.modules_collection.get_member(target_path)
        except (KeyError, griffe.AliasResolutionError):
            continue
        if target.is_alias:
            target = target.final_target
        if not target.is_function:
            if sync and target.is_attribute:
                member.docstring = target.docstring
                member.annotation = target.annotation
            continue
        copy = griffe.Function(
            name,
            lineno=member.lineno,
            endlineno=member.endlineno,
            parameters=target.parameters,
            returns=cls.name if sync and m["kind"] == "constructor" else target.returns,
            decorators=target.decorators,
            docstring=target.docstring,
        )
        copy.labels |= target.labels - ({"async"} if sync else set())
        cls.set_member(name, copy)


def _classes(obj: griffe.Object) -> list[griffe.Class]:
    found: list[griffe.Class] = []
    for member in obj.members.values():
        if member.is_alias:
            continue
        if member.is_class:
            found.append(member)  # type: ignore[arg-type]
            found.extend(_classes(member))
        elif member.is_module:
            found.extend(_classes(member))
    return found
