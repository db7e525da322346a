"""Secrets from files: ``<key>_file: PATH`` in the configuration becomes ``<key>: <contents>`` for a secret key.

Environment variables show up in /proc/<pid>/environ and in a pod spec; a file
(a Kubernetes Secret volume, a Docker secret) does not. ``<key>_files: {name: PATH}``
does the same for a mapping of secrets (PagerDuty routing keys). The file is read
at start-up and on SIGHUP, its trailing newline dropped. A value never appears in
an error message: errors name the key and the file.
"""
from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

from alertd.core.errors import Problem
from alertd.core.yamlio import Marks, Path_, format_path, mark_for

SUFFIX = "_file"
MAP_SUFFIX = "_files"
# The keys that hold secrets; other *_file keys (tls.cert_file) are plain paths and stay as they are.
SECRET_KEYS = frozenset({"token", "bearer_token", "password", "signing_secret", "api_key", "api_token",
                         "postgres_password", "postgres_dsn", "credentials", "routing_key", "routing_keys",
                         "secret", "api_keys"})  # secret: a webhook endpoint's HMAC key; api_keys: Opsgenie's


def configured_secrets(doc: object) -> set[str]:
    """Every secret value of a configuration document after ``*_file`` resolution (the log redaction's list):
    each line of a multi-line value (a token file holds one token a line), the mappings' values, and the
    Authorization value of a basic user (base64 of ``user:password``)."""
    found: set[str] = set()
    if isinstance(doc, list):
        for item in doc:
            found |= configured_secrets(item)
    elif isinstance(doc, dict):
        for key, value in doc.items():
            if key in SECRET_KEYS:
                values = value.values() if isinstance(value, dict) else [value]
                found |= {line.strip() for v in values if isinstance(v, str) for line in v.splitlines() if line.strip()}
            else:
                found |= configured_secrets(value)
        if isinstance(doc.get("username"), str) and isinstance(doc.get("password"), str):
            found.add(base64.b64encode(f"{doc['username']}:{doc['password']}".encode()).decode())
    return found


def read_secret(path: str | Path) -> str:
    """The file's text without its trailing newline (``echo token > file`` adds one)."""
    return Path(path).read_text(encoding="utf-8").rstrip("\r\n")


def resolve_files(doc: Any, source: str, marks: Marks | None = None, base: Path | None = None,
                  path: Path_ = ()) -> tuple[Any, list[Problem], set[Path_]]:
    """Replace ``*_file`` keys by the files' contents; returns (doc, problems, paths that hold secrets).

    Relative file paths are relative to ``base`` (the configuration file's directory)."""
    problems: list[Problem] = []
    secret_paths: set[Path_] = set()
    if isinstance(doc, list):
        out_list = []
        for i, item in enumerate(doc):
            value, found, paths = resolve_files(item, source, marks, base, path + (i,))
            out_list.append(value)
            problems += found
            secret_paths |= paths
        return out_list, problems, secret_paths
    if not isinstance(doc, dict):
        return doc, problems, secret_paths
    out: dict[object, object] = {}
    for key, value in doc.items():
        where = path + (key,)
        if isinstance(key, str) and key.endswith(MAP_SUFFIX) and key[: -len(MAP_SUFFIX)] in SECRET_KEYS \
                and isinstance(value, dict):
            target = key[: -len(MAP_SUFFIX)]
            merged = dict(doc.get(target) or {})
            for name, file in value.items():
                secret = _read(file, source, marks, base, where + (name,), problems)
                if secret is not None:
                    merged[name] = secret
                    secret_paths.add(path + (target, name))
            out[target] = merged
            continue
        if isinstance(key, str) and key.endswith(SUFFIX) and key[: -len(SUFFIX)] in SECRET_KEYS \
                and isinstance(value, str):
            target = key[: -len(SUFFIX)]
            if target in doc:
                problems.append(Problem(source, f"{format_path(where)}: give {target} or {key}, not both",
                                        *mark_for(marks or {}, where), format_path(where)))
                continue
            secret = _read(value, source, marks, base, where, problems)
            if secret is not None:
                out[target] = secret
                secret_paths.add(path + (target,))
            continue
        if key in out:  # already filled from <key>_files
            continue
        resolved, found, paths = resolve_files(value, source, marks, base, where)
        out[key] = resolved
        problems += found
        secret_paths |= paths
    return out, problems, secret_paths


def _read(file: Any, source: str, marks: Marks | None, base: Path | None, where: Path_,
          problems: list[Problem]) -> str | None:
    if not isinstance(file, str) or not file:
        problems.append(Problem(source, f"{format_path(where)}: must be a file path",
                                *mark_for(marks or {}, where), format_path(where)))
        return None
    target = Path(file)
    if base is not None and not target.is_absolute():
        target = base / target
    try:
        secret = read_secret(target)
    except OSError as exc:
        problems.append(Problem(source, f"{format_path(where)}: cannot read secret file {target}: {exc.strerror or exc}",
                                *mark_for(marks or {}, where), format_path(where)))
        return None
    except UnicodeDecodeError:
        problems.append(Problem(source, f"{format_path(where)}: secret file {target} is not UTF-8 text",
                                *mark_for(marks or {}, where), format_path(where)))
        return None
    if not secret.strip():
        problems.append(Problem(source, f"{format_path(where)}: secret file {target} is empty",
                                *mark_for(marks or {}, where), format_path(where)))
        return None
    return secret
