"""A cycle finder for the layering tests (module graphs of the Rust core and the package)."""

from __future__ import annotations


def cycle_in(graph: dict[str, set[str]]) -> list[str]:
    """The first circle of ``graph`` (node -> nodes it imports), as a path that ends where it
    starts; ``[]`` when there is none."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str]:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return []

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return []
