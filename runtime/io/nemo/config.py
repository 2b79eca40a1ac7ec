"""NeMo's model config as plain data: read from YAML, its ``${...}`` references resolved, its
artifacts found, its ``target`` class named (never imported).

``model_config.yaml`` is an OmegaConf dump; when it holds a top-level ``model`` section that is
the model config (as NeMo's ``restore_from`` reads it). References (``${model.sample_rate}``,
``${..x}``) are resolved here against the config they came with, so a Lightning checkpoint's
hyper-parameters read the same as a ``.nemo``'s YAML (which ``save_to`` writes resolved).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ...errors import ConversionError
from ..config_size import MAX_STRING, MAX_VALUES, expanded_size
from ..files import inside

MAX_CONFIG_BYTES = 16 << 20  # a model config is a few kilobytes; anything this large is not one
_REFERENCE = re.compile(r"\$\{([^${}]+)\}")


def read_config_yaml(path: Path) -> dict[str, Any]:
    """The model config of a ``model_config.yaml`` (plain dicts and lists, references resolved)."""
    import yaml

    path = Path(path)
    try:
        size = path.stat().st_size
        if size > MAX_CONFIG_BYTES:
            raise ConversionError(f"{path} is {size} bytes, too large for a NeMo model config")
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError, RecursionError) as e:
        raise ConversionError(f"{path} is not a readable YAML config: {_line(e)}") from e
    return model_section(data, str(path))


def model_section(data: Any, where: str) -> dict[str, Any]:
    """The model config inside a whole config (NeMo's ``if 'model' in conf: conf = conf.model``),
    references resolved against the whole."""
    if not isinstance(data, dict):
        raise ConversionError(f"{where}: expected a mapping of config fields, not {type(data).__name__}")
    resolved = resolve_references(data, where)
    section = resolved.get("model", resolved)
    if not isinstance(section, dict):
        raise ConversionError(f"{where}: the model section is {type(section).__name__}, not a mapping")
    return section


def target_class(config: dict[str, Any]) -> str:
    """The NeMo class the config names (``target``, or Hydra's ``_target_``); "" when it names none."""
    value = config.get("target", config.get("_target_", ""))
    return value if isinstance(value, str) else ""


def artifact(folder: Path, value: Any, what: str) -> Path | None:
    """The file an artifact entry names (``nemo:<name>``, or a path whose base name lies in
    ``folder``, as NeMo resolves both), inside ``folder``; None when it is not there."""
    if not isinstance(value, str) or not value:
        return None
    name = value[len("nemo:"):] if value.startswith("nemo:") else value.replace("\\", "/").rsplit("/", 1)[-1]
    path = inside(folder, name, what=what, error=ConversionError, nested=value.startswith("nemo:"))
    return path if path.is_file() else None


# ---------------------------------------------------------------------------------------------
# OmegaConf references, for the configs that were saved unresolved


def resolve_references(root: dict[str, Any], where: str) -> dict[str, Any]:
    """A copy of ``root`` with every ``${a.b}`` (absolute) and ``${..b}`` (relative) reference
    replaced by what it names; a reference to nothing is an error naming it.

    Linear in the config: its size with every alias expanded is bounded first (``config_size``),
    each reference is resolved once (memoised by its text and where it stands), a resolved string
    longer than ``MAX_STRING`` and a config past ``MAX_VALUES`` with the containers references name
    are refused."""
    sizes: dict = {}
    total = [expanded_size(root, where, ConversionError, memo=sizes)]
    resolved: dict = {}

    def walk(node: Any, path: tuple, depth: int) -> Any:
        if depth > 64:
            raise ConversionError(f"{where}: the config nests more than 64 levels deep")
        if isinstance(node, dict):
            return {k: walk(v, (*path, k), depth + 1) for k, v in node.items()}
        if isinstance(node, list):
            return [walk(v, (*path, i), depth + 1) for i, v in enumerate(node)]
        if isinstance(node, str) and "${" in node:
            return _substitute(root, node, path[:-1], where, 0, resolved, lambda value: _count(value, where, sizes, total))
        return node

    return walk(root, (), 0)


def _count(value: Any, where: str, sizes: dict, total: list) -> None:
    """A value a reference stands for, added to the config's size (a container named N times is N copies)."""
    if isinstance(value, str) and len(value) > MAX_STRING:
        raise ConversionError(f"{where}: a reference resolves to a string of more than {MAX_STRING} characters")
    if isinstance(value, (dict, list)):
        total[0] += expanded_size(value, where, ConversionError, memo=sizes)
        if total[0] > MAX_VALUES:
            raise ConversionError(f"{where}: the config expands to more than {MAX_VALUES} values (aliases or references named inside each other)")


def _substitute(root: dict, text: str, parent: tuple, where: str, hops: int, resolved: dict, count) -> Any:
    if hops > 16:
        raise ConversionError(f"{where}: the reference {text!r} goes round in a loop")
    key = (text, parent)
    if key in resolved:
        value = resolved[key]
        count(value)
        return value
    whole = _REFERENCE.fullmatch(text)
    if whole:  # a value that is one reference keeps the type of what it names
        value, at = _lookup(root, whole.group(1).strip(), parent, where)
        if isinstance(value, str) and "${" in value:
            value = _substitute(root, value, at, where, hops + 1, resolved, count)
        else:
            count(value)
    else:

        def one(m: re.Match) -> str:
            value, at = _lookup(root, m.group(1).strip(), parent, where)
            if isinstance(value, str) and "${" in value:
                value = _substitute(root, value, at, where, hops + 1, resolved, count)
            value = str(value)
            if len(value) > MAX_STRING:
                raise ConversionError(f"{where}: a reference resolves to a string of more than {MAX_STRING} characters")
            return value

        value = _REFERENCE.sub(one, text)
        count(value)
    resolved[key] = value
    return value


def _lookup(root: dict, ref: str, parent: tuple, where: str) -> tuple[Any, tuple]:
    if ":" in ref:  # a resolver call (${oc.env:X}, ${now:...}): code, never run
        raise ConversionError(f"{where}: the config calls the resolver ${{{ref}}}; resolve it before converting")
    dots = len(ref) - len(ref.lstrip("."))
    if dots:
        base = parent[: len(parent) - (dots - 1)] if dots - 1 <= len(parent) else None
    else:
        base = ()
    keys = [k for k in ref.lstrip(".").split(".") if k]
    node: Any = root
    if base is None:
        raise ConversionError(f"{where}: the reference ${{{ref}}} climbs above the config's root")
    for key in (*base, *keys):
        if isinstance(node, dict) and key in node:
            node = node[key]
        elif isinstance(node, list) and str(key).isdigit() and int(key) < len(node):
            node = node[int(key)]
        else:
            raise ConversionError(f"{where}: the reference ${{{ref}}} names nothing in the config")
    return node, tuple((*base, *keys))[:-1]


def _line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__
