"""Slack's Block Kit limits, as ``chat.postMessage`` and ``chat.update`` enforce them (``invalid_blocks``)."""
from __future__ import annotations

from typing import Any

MAX_BLOCKS = 50
MAX_SECTION_TEXT = 3000
MAX_SECTION_FIELDS = 10
MAX_FIELD_TEXT = 2000
MAX_HEADER_TEXT = 150
MAX_BLOCK_ID = 255
MAX_CONTEXT_ELEMENTS = 10
MAX_ACTIONS_ELEMENTS = 25
MAX_MARKDOWN_BLOCK_TEXT = 12000
MAX_IMAGE_URL = 3000
MAX_ALT_TEXT = 2000

BLOCK_TYPES = frozenset({
    "section", "header", "divider", "context", "actions", "image", "rich_text",
    "input", "file", "video", "markdown",
})
TEXT_TYPES = frozenset({"plain_text", "mrkdwn"})


def _text_errors(obj: Any, ptr: str, *, max_len: int, plain_only: bool = False) -> list[str]:
    if not isinstance(obj, dict):
        return [f"must be an object [json-pointer:{ptr}]"]
    errors = []
    kind = obj.get("type")
    allowed = {"plain_text"} if plain_only else TEXT_TYPES
    if kind not in allowed:
        errors.append(f"must be one of {sorted(allowed)} [json-pointer:{ptr}/type]")
    text = obj.get("text")
    if not isinstance(text, str):
        errors.append(f"missing required field: text [json-pointer:{ptr}]")
    elif len(text) == 0:
        errors.append(f"must be more than 0 characters [json-pointer:{ptr}/text]")
    elif len(text) > max_len:
        errors.append(f"must be less than {max_len + 1} characters [json-pointer:{ptr}/text]")
    return errors


def _count_error(items: Any, most: int, ptr: str) -> str:
    if not isinstance(items, list) or not items:
        return f"must be a non-empty array [json-pointer:{ptr}]"
    if len(items) > most:
        return f"no more than {most} items allowed [json-pointer:{ptr}]"
    return ""


def validate_blocks(blocks: list) -> list[str]:
    """Slack's ``invalid_blocks`` reasons for ``blocks`` (empty when valid)."""
    if len(blocks) > MAX_BLOCKS:
        return [f"no more than {MAX_BLOCKS} items allowed [json-pointer:/blocks]"]
    errors: list[str] = []
    seen_ids: set[str] = set()
    for i, block in enumerate(blocks):
        ptr = f"/blocks/{i}"
        if not isinstance(block, dict):
            errors.append(f"must be an object [json-pointer:{ptr}]")
            continue
        kind = block.get("type")
        if kind not in BLOCK_TYPES:
            errors.append(f"unsupported type: {kind} [json-pointer:{ptr}/type]")
            continue
        block_id = block.get("block_id")
        if block_id is not None:
            if not isinstance(block_id, str) or not block_id or len(block_id) > MAX_BLOCK_ID:
                errors.append(f"must be 1..{MAX_BLOCK_ID} characters [json-pointer:{ptr}/block_id]")
            elif block_id in seen_ids:
                errors.append(f"duplicate block_id: {block_id} [json-pointer:{ptr}/block_id]")
            else:
                seen_ids.add(block_id)
        if kind == "section":
            if "text" not in block and "fields" not in block:
                errors.append(f"must provide either text or fields [json-pointer:{ptr}]")
            if "text" in block:
                errors += _text_errors(block["text"], f"{ptr}/text", max_len=MAX_SECTION_TEXT)
            if "fields" in block:
                fields = block["fields"]
                if problem := _count_error(fields, MAX_SECTION_FIELDS, f"{ptr}/fields"):
                    errors.append(problem)
                else:
                    for j, f in enumerate(fields):
                        errors += _text_errors(f, f"{ptr}/fields/{j}", max_len=MAX_FIELD_TEXT)
        elif kind == "header":
            errors += _text_errors(block.get("text"), f"{ptr}/text", max_len=MAX_HEADER_TEXT, plain_only=True)
        elif kind == "context":
            elements = block.get("elements")
            if problem := _count_error(elements, MAX_CONTEXT_ELEMENTS, f"{ptr}/elements"):
                errors.append(problem)
            else:
                for j, el in enumerate(elements):
                    eptr = f"{ptr}/elements/{j}"
                    if isinstance(el, dict) and el.get("type") == "image":
                        if not el.get("alt_text") or not (el.get("image_url") or el.get("slack_file")):
                            errors.append(f"image needs image_url and alt_text [json-pointer:{eptr}]")
                    else:
                        errors += _text_errors(el, eptr, max_len=MAX_SECTION_TEXT)
        elif kind == "actions":
            if problem := _count_error(block.get("elements"), MAX_ACTIONS_ELEMENTS, f"{ptr}/elements"):
                errors.append(problem)
        elif kind == "image":
            url = block.get("image_url")
            if not (isinstance(url, str) and 0 < len(url) <= MAX_IMAGE_URL) and not block.get("slack_file"):
                errors.append(f"missing required field: image_url [json-pointer:{ptr}]")
            alt = block.get("alt_text")
            if not isinstance(alt, str) or not alt or len(alt) > MAX_ALT_TEXT:
                errors.append(f"must be 1..{MAX_ALT_TEXT} characters [json-pointer:{ptr}/alt_text]")
        elif kind == "markdown":
            text = block.get("text")
            if not isinstance(text, str) or not text or len(text) > MAX_MARKDOWN_BLOCK_TEXT:
                errors.append(f"must be 1..{MAX_MARKDOWN_BLOCK_TEXT} characters [json-pointer:{ptr}/text]")
        elif kind == "rich_text":
            if not isinstance(block.get("elements"), list):
                errors.append(f"missing required field: elements [json-pointer:{ptr}]")
    return errors
