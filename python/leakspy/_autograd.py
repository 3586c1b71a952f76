"""The one walk over an autograd graph that the census, suspects and
examples share."""


def walk(root, seen, cap):
    """Adds to ``seen`` the autograd nodes reachable from ``root`` (itself
    included) through ``next_functions``; returns True when it stopped
    because ``seen`` reached ``cap`` nodes."""
    seen.add(root)
    stack = [root]
    while stack:
        if len(seen) >= cap:
            return True
        node = stack.pop()
        try:
            nexts = node.next_functions
        except Exception:
            continue
        for pair in nexts:
            nxt = pair[0]
            if nxt is not None and nxt not in seen:
                seen.add(nxt)
                stack.append(nxt)
    return len(seen) >= cap
