"""Mutation operators that cosmic-ray lacks, for `scripts/mutation.py`: the ones the decision code needs.

cosmic-ray's own operators change operators, numbers and booleans. What decides a rental's fate is also in
tables (`TRANSITIONS`, the state sets, the fields a verdict stores) and in a few calls (`min` of two deadlines,
a function that returns nothing), so these add: drop one element of a set or dict display, swap `min` and
`max`, and make a `return <value>` return None. Each is a cosmic-ray `Operator` over parso nodes.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import parso.python.tree as tree
from cosmic_ray.operators.operator import Operator

Position = tuple[tuple[int, int], tuple[int, int]]


def _replacement(node: Any, code: str) -> Any:
    """Return a leaf that prints as `code` in place of `node` (parso prints a leaf as prefix + value)."""
    return tree.Name(code, node.start_pos, prefix=node.get_first_leaf().prefix)


def _display_elements(node: Any) -> list[list[Any]] | None:
    """Return the elements of a `{...}` set or dict display (each a list of parso nodes), or None."""
    if node.type != "atom" or len(node.children) != 3 or node.children[0].value != "{":
        return None
    inner = node.children[1]
    if inner.type != "dictorsetmaker":
        return [[inner]]
    if any(child.type in ("comp_for", "sync_comp_for") for child in inner.children):
        return None  # a comprehension: no element to drop
    elements: list[list[Any]] = [[]]
    for child in inner.children:
        if child.type == "operator" and child.value == ",":
            elements.append([])
        else:
            elements[-1].append(child)
    return [element for element in elements if element]


class RemoveElement(Operator):
    """Drop one element of a set display, or one key of a dict display: `{a, b}` → `{b}`."""

    def mutation_positions(self, node: Any) -> Iterator[Position]:
        for element in _display_elements(node) or []:
            yield element[0].start_pos, element[-1].end_pos

    def mutate(self, node: Any, index: int) -> Any:
        elements = _display_elements(node) or []
        kept = [elements[i] for i in range(len(elements)) if i != index]
        # An element's own prefix (indentation, a comment above it) is left out: the rest goes on one line.
        codes = ["".join(part.get_code(include_prefix=i > 0) for i, part in enumerate(element)) for element in kept]
        return _replacement(node, "{" + ", ".join(codes) + "}")

    @classmethod
    def examples(cls) -> tuple[()]:
        return ()


class SwapMinMax(Operator):
    """Call `max` where the code calls `min`, and the other way round."""

    SWAP = {"min": "max", "max": "min"}

    def mutation_positions(self, node: Any) -> Iterator[Position]:
        if node.type == "name" and node.value in self.SWAP:
            following = node.get_next_sibling()
            if following is not None and following.type == "trailer" and following.children[0].value == "(":
                yield node.start_pos, node.end_pos

    def mutate(self, node: Any, index: int) -> Any:
        return _replacement(node, self.SWAP[node.value])

    @classmethod
    def examples(cls) -> tuple[()]:
        return ()


class ReturnNone(Operator):
    """Make `return <value>` return None (unless the value already is None)."""

    def mutation_positions(self, node: Any) -> Iterator[Position]:
        if node.type == "return_stmt" and node.children[1].get_code().strip() != "None":
            yield node.start_pos, node.end_pos

    def mutate(self, node: Any, index: int) -> Any:
        return _replacement(node, "return None")

    @classmethod
    def examples(cls) -> tuple[()]:
        return ()


OPERATORS: dict[str, type[Operator]] = {
    "RemoveElement": RemoveElement,
    "SwapMinMax": SwapMinMax,
    "ReturnNone": ReturnNone,
}
