"""Declared metadata fields and what a write adds (``core.filter_fields``): no server."""

from __future__ import annotations

from typing import Any

import pytest

from betterdb_memory.core.filter_fields import (
    BUILTIN_FIELDS,
    MAX_METADATA_FIELDS,
    PRESENCE_FIELD,
    RESERVED_NAMES,
    MetadataFields,
    index_fields,
    schema_args,
)
from betterdb_memory.core.query import ITEM_FIELDS
from betterdb_memory.errors import ConfigurationError, ValidationError
from tests.filter_cases import MD

# -- declarations ----------------------------------------------------------------------------


def test_declaration_keeps_order_and_builds_field_specs() -> None:
    assert list(MD) == [("priority", "numeric"), ("project", "tag")]
    assert len(MD) == 2
    assert MD.specs["priority"].doc_field == "meta_priority"
    assert MD.specs["project"].multi and MD.specs["project"].exists_by == "presence"
    assert MD.specs["priority"].exists_by == "range"
    assert MetadataFields.of(None) == MetadataFields() and not MetadataFields.of({})
    assert MetadataFields.of(MD) is MD


def test_declaration_digest_ignores_order_and_tells_types_apart() -> None:
    a = MetadataFields.of({"x": "tag", "y": "numeric"})
    assert a.digest == MetadataFields.of({"y": "numeric", "x": "tag"}).digest
    assert a.digest != MetadataFields.of({"x": "numeric", "y": "numeric"}).digest


@pytest.mark.parametrize(
    ("declared", "code"),
    [
        (["priority"], "configuration.type"),
        ({"priority": "int"}, "configuration.choice"),
        ({"priority": None}, "configuration.choice"),
        ({"": "tag"}, "configuration.field_name"),
        ({"1st": "tag"}, "configuration.field_name"),
        ({"a-b": "tag"}, "configuration.field_name"),
        ({"a.b": "tag"}, "configuration.field_name"),
        ({"x" * 65: "tag"}, "configuration.field_name"),
        ({3: "tag"}, "configuration.field_name"),
        ({"source": "tag"}, "configuration.reserved_field"),
        ({"Source": "tag"}, "configuration.reserved_field"),
        ({"threadId": "tag"}, "configuration.reserved_field"),
        ({"thread_id": "tag"}, "configuration.reserved_field"),
        ({"subject": "tag"}, "configuration.reserved_field"),
        ({"present": "tag"}, "configuration.reserved_field"),
        ({"valid_from": "numeric"}, "configuration.reserved_field"),
        ({"project": "tag", "Project": "tag"}, "configuration.reserved_field"),
        ({f"f{i}": "tag" for i in range(MAX_METADATA_FIELDS + 1)}, "configuration.too_many"),
    ],
)
def test_bad_declarations_are_configuration_errors(declared: Any, code: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        MetadataFields.of(declared)
    assert info.value.code == code
    assert info.value.details["argument"] == "metadata_fields"


def test_every_field_a_memory_is_written_with_is_reserved() -> None:
    written = {*ITEM_FIELDS, "vector", "keep", "dedup", "metadata", "kind", "date", *BUILTIN_FIELDS}
    assert {n.lower() for n in written} <= RESERVED_NAMES
    for name in written:
        with pytest.raises(ConfigurationError):
            MetadataFields.of({name: "tag"})


def test_schema_args_declare_tags_exact_and_the_presence_field() -> None:
    assert schema_args(MD) == [
        "meta_priority", "NUMERIC",
        "meta_project", "TAG", "SEPARATOR", ",", "CASESENSITIVE",
        "present", "TAG", "SEPARATOR", ",", "CASESENSITIVE",
    ]  # fmt: skip
    assert schema_args(MetadataFields()) == []


# -- what a write adds -----------------------------------------------------------------------


def test_index_fields_write_values_and_presence() -> None:
    assert index_fields({"priority": 3, "project": ["a", "b", "a"], "other": 1}, MD) == {
        "meta_priority": "3.0",
        "meta_project": "a,b",
        "present": "priority,project",
    }
    assert index_fields({"project": "apollo"}, MD) == {"meta_project": "apollo", "present": "project"}
    assert index_fields({"priority": -0.5}, MD) == {"meta_priority": "-0.5", "present": "priority"}


@pytest.mark.parametrize(
    "metadata", [None, {}, {"other": 1}, {"priority": None, "project": None}, {"project": []}]
)
def test_index_fields_absent_none_and_empty_list_are_missing(metadata: Any) -> None:
    assert index_fields(metadata, MD) == {}


def test_index_fields_without_declarations_add_nothing() -> None:
    assert index_fields({"priority": 1}, MetadataFields()) == {}


@pytest.mark.parametrize(
    ("metadata", "code"),
    [
        ({"priority": "high"}, "validation.metadata_field"),
        ({"priority": True}, "validation.metadata_field"),
        ({"priority": float("nan")}, "validation.metadata_field"),
        ({"priority": 10**400}, "validation.metadata_field"),
        ({"priority": [1]}, "validation.metadata_field"),
        ({"project": 7}, "validation.metadata_field"),
        ({"project": {"a": 1}}, "validation.metadata_field"),
        ({"project": ["ok", 3]}, "validation.type"),
        ({"project": "a,b"}, "validation.comma"),
        ({"project": " a"}, "validation.whitespace"),
        ({"project": ""}, "validation.empty"),
        ({"project": "a*"}, "validation.wildcard"),
        ({"project": [f"v{i}" for i in range(65)]}, "validation.metadata_field"),
    ],
)
def test_index_fields_strict_refuses_values_that_do_not_fit(metadata: Any, code: str) -> None:
    with pytest.raises(ValidationError) as info:
        index_fields(metadata, MD)
    assert info.value.code == code
    # A backfill of older memories leaves the value out instead (the field is missing).
    lenient = index_fields(metadata, MD, strict=False)
    assert not any(k.startswith("meta_") for k in lenient) and PRESENCE_FIELD not in lenient
