"""Schema errors in the words of the file's author: the key, what was wrong, and how it should look.

One wording for every file the schemas check (config, rules, tests, the webhook), so a matcher typo
in correlation.yml reads like one in routing.yml, a bad duration shows an example instead of a regex,
and an unknown key names the key it was probably meant to be. A schema node may word its own refusal by the
keyword that refused it, in ajv-errors' ``errorMessage`` annotation (``{"errorMessage": {"pattern": "is not a
key's name ..."}}``): the value, then those words."""
from __future__ import annotations

import difflib
import json
from typing import Any, Iterable

from jsonschema.exceptions import ValidationError, best_match

from alertd.core.matchers import MatcherError, parse_matcher
from alertd.core.yamlio import format_path

DURATION_HINT = "use a Prometheus duration such as 30s, 5m or 1h30m (units: ms, s, m, h, d, w, y)"
MATCHER_OPERATORS = "(=~|!~|!=|=)"  # how the schemas' matcher patterns are recognised
LISTEN_HINT = "use HOST:PORT, e.g. 127.0.0.1:9095, 0.0.0.0:9095 or [::1]:9095"


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` for the closest choice, or nothing when none is close."""
    close = difflib.get_close_matches(word, sorted(choices), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def describe(error: ValidationError) -> str:
    """A message that names the key, not the schema internals."""
    where = format_path(tuple(error.absolute_path)) or "document"
    own = error.schema.get("errorMessage") if isinstance(error.schema, dict) else None
    if isinstance(own, dict) and isinstance(said := own.get(str(error.validator)), str):
        return f"{where}: {error.instance!r} {said}"
    if error.validator == "additionalProperties":
        known = set(error.schema.get("properties", {}))
        extra = sorted(set(error.instance) - known)
        return f"{where}: unknown key(s) " + ", ".join(f"{k!r}{did_you_mean(str(k), known)}" for k in extra)
    if error.validator == "required":
        return f"{where}: {error.message}"
    if error.validator == "minProperties" and error.validator_value == 1 and isinstance(error.schema, dict):
        keys = " or ".join(repr(k) for k in error.schema.get("properties", {}))
        return f"{where}: empty" + (f": give {keys}" if keys else "")
    if error.validator == "enum":
        return f"{where}: {error.instance!r} is not one of {error.validator_value}"
    if error.validator == "const" or (error.validator == "type" and isinstance(error.schema, dict)
                                      and "const" in error.schema):
        accepted = error.schema["const"] if error.validator == "type" else error.validator_value
        kind = f" (not a {error.validator_value})" if error.validator == "type" else ""
        return f"{where}: got {json.dumps(error.instance)}{kind}, accepted only {json.dumps(accepted)}"
    if error.validator == "pattern" and isinstance(error.instance, str):
        return f"{where}: {_pattern_message(error.instance, str(error.validator_value))}"
    says = error.schema.get("description") if isinstance(error.schema, dict) else None
    if error.validator in ("anyOf", "oneOf") and (kinds := _kinds_refused(error)):
        return f"{where}: {error.instance!r} is not of type {' or '.join(kinds)}" + (f": {says}" if says else "")
    if error.validator in ("anyOf", "oneOf") and says and error.context:  # (not when several alternatives took it)
        return f"{where}: {error.instance!r} is not valid: {says}"
    return f"{where}: {error.message}"


def meant(error: ValidationError) -> ValidationError:
    """For an object or a list none of anyOf's or oneOf's alternatives takes, the error of the one alternative
    of its type (a Slack receiver's object with a misspelt key is about that key, not about being no string
    either); the error itself when the value's type fits none of them or several, or it is a single value."""
    if error.validator not in ("anyOf", "oneOf") or not error.context or not isinstance(error.instance, (dict, list)):
        return error
    by_choice: dict[object, list[ValidationError]] = {}
    for e in error.context:
        by_choice.setdefault(e.relative_schema_path[0], []).append(e)
    fits = [errors for errors in by_choice.values() if not any(_type_refused(e) for e in errors)]
    chosen = best_match(fits[0]) if len(fits) == 1 else None
    return meant(chosen) if chosen is not None else error


def _type_refused(error: ValidationError) -> bool:
    return error.validator == "type" and not error.relative_path


def _kinds_refused(error: ValidationError) -> list[str]:
    """The types the alternatives take, when each refused the value for its type (else nothing)."""
    refused = {e.relative_schema_path[0]: e for e in error.context if _type_refused(e)}
    if not refused or len(refused) < len(error.validator_value):
        return []
    kinds = [t for e in refused.values() for t in (e.validator_value if isinstance(e.validator_value, list)
                                                   else [e.validator_value])]
    return [repr(t) for t in dict.fromkeys(kinds)]


def _pattern_message(value: str, pattern: str) -> str:
    if "(ms|s|m|h|d|w|y)" in pattern:
        return f"{value!r} is not a duration: {DURATION_HINT}"
    if MATCHER_OPERATORS in pattern:
        try:
            parse_matcher(value)
        except MatcherError as exc:
            return str(exc)
        return f'bad matcher {value!r}: quote the value, as in name="value"'
    if pattern.endswith(":[0-9]{1,5}$"):
        return f"{value!r} is not an address to listen on: {LISTEN_HINT}"
    return f"{value!r} does not match {pattern!r}"


def describe_secret(error: ValidationError) -> str:
    """The same for a value read from a secret file: which rule it broke, never the value itself."""
    where = format_path(tuple(error.absolute_path))
    value: Any = error.instance
    size = f" (it holds {len(value)})" if isinstance(value, str) else ""
    rule = {
        "minLength": f"is shorter than the {error.validator_value} characters it needs{size}",
        "maxLength": f"is longer than the {error.validator_value} characters allowed{size}",
        "pattern": "does not have the required form",
        "type": f"is not a {error.validator_value}",
    }.get(str(error.validator), "is not valid")
    return f"{where}: the value read from its secret file {rule}"
