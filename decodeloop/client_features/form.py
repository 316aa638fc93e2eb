"""The form of an elicitation: what a `requestedSchema` may ask (MCP 2025-11-25) and what an answer must be.

The spec allows a flat object of primitive properties: strings (minLength, maxLength, pattern, format
email, uri, date or date-time), numbers and integers (minimum, maximum), booleans, single-select enums
(`enum`, `oneOf` with const and title, the legacy `enumNames`) and multi-select enums (an array of
`items.enum` or `items.anyOf`), each default valid for its field. `parse_schema` reads one into `Field`s or
raises `SchemaError` saying what is not allowed, within bounds on its size (fields, choices, names, JSON);
`Field.parse` reads a line typed for a field and `Field.problem` says why a value does not fit;
`content_problem` checks a whole answer before it is sent. Asking is elicitation.py's.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import math
import re
from typing import Any

from decodeloop.text.untrusted import cap_text

MAX_FIELDS = 50  # fields of one form
MAX_OPTIONS = 200  # choices of one field
MAX_LABEL_CHARS = 200  # a field's name, title, or a choice's title, as shown
MAX_SCHEMA_CHARS = 64_000  # a requestedSchema as JSON: its names, choices and defaults go into the event
FORMATS = ("email", "uri", "date", "date-time")
SECRET = re.compile(r"pass(word|phrase|wd)|secret|api[ _-]?key|token|credential|private[ _-]?key", re.IGNORECASE)
EMAIL = re.compile(r"[^@\s]+@[^@\s]+\.[^@\s.]+")
DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
DATE_TIME = re.compile(r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})")
URI_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:\S+")
YES, NO = ("y", "yes"), ("n", "no")  # a boolean typed as a word


class SchemaError(ValueError):
    """A requestedSchema that is not the flat object of primitive properties the spec allows."""


MISSING: Any = object()  # a field without a default, or an optional field left out


@dataclasses.dataclass
class Field:
    """One property of a form: what it is, what it allows, and how to show it."""

    name: str
    type: str  # "string", "number", "integer", "boolean", "choice" (single-select) or "choices" (multi-select)
    required: bool
    title: str | None = None
    description: str | None = None
    default: Any = MISSING
    min_length: int | None = None
    max_length: int | None = None
    pattern: str | None = None
    format: str | None = None
    minimum: float | None = None
    maximum: float | None = None
    options: list[tuple[str, str | None]] = dataclasses.field(default_factory=list)  # (value, title)
    min_items: int | None = None
    max_items: int | None = None

    def problem(self, value: Any) -> str | None:
        """Why a value does not fit this field (None: it fits)."""
        if self.type == "boolean":
            return None if isinstance(value, bool) else "not true or false"
        if self.type in ("number", "integer"):
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                return "not a number"
            if isinstance(value, float) and not math.isfinite(value):
                return "not a finite number"
            if self.type == "integer" and not (isinstance(value, int) or value.is_integer()):
                return "not a whole number"
            if self.minimum is not None and value < self.minimum:
                return f"less than the minimum {self.minimum:g}"
            if self.maximum is not None and value > self.maximum:
                return f"more than the maximum {self.maximum:g}"
            return None
        values = [value for value, _ in self.options]
        if self.type == "choice":
            return None if isinstance(value, str) and value in values else "not one of the choices"
        if self.type == "choices":
            if not isinstance(value, list) or not all(isinstance(item, str) and item in values for item in value):
                return "not a list of the choices"
            if len(set(value)) != len(value):
                return "a choice given twice"
            if self.min_items is not None and len(value) < self.min_items:
                return f"fewer than {self.min_items} choices"
            if self.max_items is not None and len(value) > self.max_items:
                return f"more than {self.max_items} choices"
            return None
        if not isinstance(value, str):
            return "not text"
        if self.min_length is not None and len(value) < self.min_length:
            return f"shorter than {self.min_length} characters"
        if self.max_length is not None and len(value) > self.max_length:
            return f"longer than {self.max_length} characters"
        if self.pattern is not None and re.search(self.pattern, value) is None:
            return f"does not match the pattern {self.pattern}"
        if self.format is not None and not _formatted(self.format, value):
            return {
                "email": "not an email address",
                "uri": "not a URI (scheme:rest, as https://example.com)",
                "date": "not a date (YYYY-MM-DD)",
                "date-time": "not a date and time (YYYY-MM-DDTHH:MM:SS with Z or an offset)",
            }[self.format]
        return None

    def parse(self, text: str) -> Any:
        """The value a typed line stands for, or ValueError saying why it does not fit."""
        if self.type == "boolean":
            word = text.lower()
            if word in (*YES, "true"):
                return True
            if word in (*NO, "false"):
                return False
            raise ValueError("answer y or n")
        if self.type in ("number", "integer"):
            try:
                value: Any = int(text)
            except ValueError:
                if self.type == "integer":
                    raise ValueError("not a whole number") from None
                try:
                    value = float(text)
                except ValueError:
                    raise ValueError("not a number") from None
        elif self.type == "choice":
            value = self._option(text)
        elif self.type == "choices":
            value = [self._option(part.strip()) for part in text.split(",") if part.strip()]
        else:
            value = text
        why = self.problem(value)
        if why is not None:
            raise ValueError(why)
        return value

    def _option(self, text: str) -> str:
        """A choice by its number, its value, or its title."""
        if text.isdigit() and 1 <= int(text) <= len(self.options):
            return self.options[int(text) - 1][0]
        if text in (value for value, _ in self.options):
            return text
        for value, title in self.options:
            if title is not None and text == title:
                return value
        raise ValueError(f"{text!r} is not one of the choices: give its number or its value")


def _formatted(form: str, text: str) -> bool:
    if form == "email":
        return EMAIL.fullmatch(text) is not None
    if form == "uri":
        return URI_SCHEME.fullmatch(text) is not None
    try:
        if form == "date":
            return DATE.fullmatch(text) is not None and bool(datetime.date.fromisoformat(text))
        return DATE_TIME.fullmatch(text) is not None and bool(datetime.datetime.fromisoformat(text.upper()))
    except ValueError:  # 2025-02-30, hour 25
        return False


def parse_schema(schema: Any) -> list[Field]:
    """The fields of a requestedSchema, or SchemaError saying what the spec does not allow in it."""
    if not isinstance(schema, dict) or schema.get("type") != "object":
        raise SchemaError('requestedSchema is not an object schema ({"type": "object", ...})')
    properties = schema.get("properties", {})
    if not isinstance(properties, dict):
        raise SchemaError("its properties are not an object")
    if len(properties) > MAX_FIELDS:
        raise SchemaError(f"it asks for {len(properties)} fields, more than {MAX_FIELDS}")
    required = schema.get("required", [])
    if not isinstance(required, list) or not all(isinstance(name, str) for name in required):
        raise SchemaError("its required is not a list of names")
    long = [name for name in properties if len(name) > MAX_LABEL_CHARS]
    if long:
        raise SchemaError(f"a field's name is {len(long[0]):,} characters long, more than {MAX_LABEL_CHARS}")
    size = len(json.dumps(schema, ensure_ascii=False, default=str))
    if size > MAX_SCHEMA_CHARS:
        raise SchemaError(f"it is {size:,} characters of JSON, more than {MAX_SCHEMA_CHARS:,}")
    unknown = [name for name in required if name not in properties]
    if unknown:
        raise SchemaError(f"it requires {_names(unknown)}, which it does not define")
    return [_field(name, prop, name in required) for name, prop in properties.items()]


def _names(names: list[str]) -> str:
    return ", ".join(repr(cap_text(name, MAX_LABEL_CHARS, "name")) for name in names[:5])


def _field(name: str, prop: Any, required: bool) -> Field:
    where = f"field {name!r}"
    if not isinstance(prop, dict):
        raise SchemaError(f"{where} is not a schema object")
    kind = prop.get("type")
    field = Field(name, "string", required)
    for key in ("title", "description"):
        if key in prop:
            if not isinstance(prop[key], str):
                raise SchemaError(f"{where}: its {key} is not text")
            setattr(field, key, prop[key])
    if kind == "string":
        _string(field, prop, where)
    elif kind in ("number", "integer"):
        field.type = kind
        for key in ("minimum", "maximum"):
            if key in prop:
                if not _is_number(prop[key]):
                    raise SchemaError(f"{where}: its {key} is not a number")
                setattr(field, key, prop[key])
        if field.minimum is not None and field.maximum is not None and field.minimum > field.maximum:
            raise SchemaError(f"{where}: its minimum is more than its maximum")
    elif kind == "boolean":
        field.type = "boolean"
    elif kind == "array":
        _multi(field, prop, where)
    else:
        what = "nested objects are not allowed" if kind == "object" else "not string, number, integer, boolean or array"
        raise SchemaError(f"{where} has type {json.dumps(kind)[:40]}: {what}")
    if "default" in prop:
        why = field.problem(prop["default"])
        if why is not None:
            raise SchemaError(f"{where}: its default is {why}")
        field.default = prop["default"]
    return field


def _string(field: Field, prop: dict, where: str) -> None:
    if "enum" in prop or "oneOf" in prop:
        field.type = "choice"
        if "oneOf" in prop:
            field.options = _titled(prop["oneOf"], f"{where}: its oneOf")
        else:
            field.options = _untitled(prop["enum"], f"{where}: its enum")
            names = prop.get("enumNames")
            if names is not None:  # legacy titles, one per value
                if not isinstance(names, list) or len(names) != len(field.options):
                    raise SchemaError(f"{where}: its enumNames is not a list as long as its enum")
                if not all(isinstance(n, str) for n in names):
                    raise SchemaError(f"{where}: its enumNames are not all text")
                field.options = [(value, title) for (value, _), title in zip(field.options, names)]
        return
    for key in ("minLength", "maxLength"):
        if key in prop and not _is_count(prop[key]):
            raise SchemaError(f"{where}: its {key} is not a whole number of characters")
    field.min_length, field.max_length = prop.get("minLength"), prop.get("maxLength")
    if field.min_length is not None and field.max_length is not None and field.min_length > field.max_length:
        raise SchemaError(f"{where}: its minLength is more than its maxLength")
    if "format" in prop:
        if prop["format"] not in FORMATS:
            raise SchemaError(
                f"{where}: its format {json.dumps(prop['format'])[:40]} is not one of {', '.join(FORMATS)}"
            )
        field.format = prop["format"]
    if "pattern" in prop:
        if not isinstance(prop["pattern"], str):
            raise SchemaError(f"{where}: its pattern is not text")
        try:
            re.compile(prop["pattern"])
        except re.error as exc:
            raise SchemaError(f"{where}: its pattern is not a regular expression ({exc})") from None
        field.pattern = prop["pattern"]


def _multi(field: Field, prop: dict, where: str) -> None:
    field.type = "choices"
    items = prop.get("items")
    if not isinstance(items, dict) or ("enum" not in items and "anyOf" not in items):
        raise SchemaError(f"{where}: an array must be a multi-select: items with enum or anyOf")
    if "anyOf" in items:
        field.options = _titled(items["anyOf"], f"{where}: its items.anyOf")
    else:
        field.options = _untitled(items["enum"], f"{where}: its items.enum")
    for key, attr in (("minItems", "min_items"), ("maxItems", "max_items")):
        if key in prop:
            if not _is_count(prop[key]):
                raise SchemaError(f"{where}: its {key} is not a whole number")
            setattr(field, attr, prop[key])
    if field.min_items is not None and field.max_items is not None and field.min_items > field.max_items:
        raise SchemaError(f"{where}: its minItems is more than its maxItems")


def _untitled(values: Any, where: str) -> list[tuple[str, str | None]]:
    if not isinstance(values, list) or not values or not all(isinstance(v, str) for v in values):
        raise SchemaError(f"{where} is not a list of text values")
    return _options([(value, None) for value in values], where)


def _titled(items: Any, where: str) -> list[tuple[str, str | None]]:
    if not isinstance(items, list) or not items:
        raise SchemaError(f"{where} is not a list of choices")
    options: list[tuple[str, str | None]] = []
    for item in items:
        if not isinstance(item, dict) or not isinstance(item.get("const"), str):
            raise SchemaError(f"{where}: a choice is not {{const, title}} with text values")
        title = item.get("title")
        if title is not None and not isinstance(title, str):
            raise SchemaError(f"{where}: a choice's title is not text")
        options.append((item["const"], title))
    return _options(options, where)


def _options(options: list[tuple[str, str | None]], where: str) -> list[tuple[str, str | None]]:
    if len(options) > MAX_OPTIONS:
        raise SchemaError(f"{where} has {len(options)} choices, more than {MAX_OPTIONS}")
    if len({value for value, _ in options}) != len(options):
        raise SchemaError(f"{where} holds a value twice")
    return options


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def content_problem(fields: list[Field], content: Any) -> str | None:
    """Why content does not fit the form (None: it does): every required field there, every value valid."""
    if not isinstance(content, dict):
        return "the content is not an object"
    known = {field.name: field for field in fields}
    for name, value in content.items():
        if name not in known:
            return f"{name!r} is not a field of the form"
        why = known[name].problem(value)
        if why is not None:
            return f"{name!r} is {why}"
    missing = [field.name for field in fields if field.required and field.name not in content]
    return f"{_names(missing)} required but missing" if missing else None
