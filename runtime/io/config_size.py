"""Bounds on config data read from a checkpoint or a registry file, so reading it is linear.

YAML aliases (and a pickle's shared objects) let a few kilobytes name a tree of billions of
values: each alias is one object, but a walk that copies the tree copies it anew at every place
it is named. ``expanded_size`` counts the values of the tree as the walk would see them, with
each shared node counted once in time (its size memoised), and refuses a tree past
``MAX_VALUES``; a tree that names itself (``&a [*a]``) is refused too. Real model configs hold a
few thousand values.
"""

from __future__ import annotations

from typing import Any

MAX_VALUES = 200_000  # values in a config, every alias expanded
MAX_DEPTH = 100
MAX_STRING = 1 << 16  # characters in one string made by resolving references


def expanded_size(data: Any, where: str, error: type[Exception], limit: int = MAX_VALUES, memo: dict | None = None) -> int:
    """The number of values in ``data`` with every shared container counted where it is named;
    ``error`` naming ``where`` past ``limit``, for a cycle, or past ``MAX_DEPTH`` levels."""
    memo = {} if memo is None else memo
    busy = object()

    def size(node: Any, depth: int) -> int:
        if not isinstance(node, (dict, list, tuple)):
            return 1
        key = id(node)
        known = memo.get(key)
        if known is busy:
            raise error(f"{where}: the config contains itself (a YAML alias inside its own anchor)")
        if known is not None:
            return known[0]
        if depth > MAX_DEPTH:
            raise error(f"{where}: the config nests more than {MAX_DEPTH} levels deep")
        memo[key] = busy
        children = node.items() if isinstance(node, dict) else enumerate(node)
        n = 1
        for k, v in children:
            n += size(v, depth + 1) + (1 if isinstance(node, dict) else 0)
            if n > limit:
                raise error(f"{where}: the config expands to more than {limit} values (aliases or references named inside each other)")
        memo[key] = (n, node)  # the node kept alive, so its id is not reused while the memo lives
        return n

    return size(data, 0)
