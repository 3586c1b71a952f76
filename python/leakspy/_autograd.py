"""The one walk over an autograd graph that the census, suspects and
examples share."""

from ._steps import run

# The census's series of the autograd graphs alive at a step boundary: their
# nodes, and the history they keep (Census._history), either of which names
# the same leak; and the nodes of the largest one graph, which grows where
# one tensor chains every step to the last (a running statistic updated from
# the graph, `total += loss`) while other graphs are kept beside it.
GRAPH_KEYS = ("graph", "graph.history", "graph.largest")
# The series of all graphs together: one suspect for both is enough.
ALL_GRAPHS = ("graph", "graph.history")
# The series that a chain grows (`total = total + loss`): its head is a new
# tensor every step, rebound to the same name.
CHAIN_KEYS = ("graph.history", "graph.largest")
# Nodes walked between two pauses of a census's walk (some 5-10 ms).
STEP_NODES = 5000


def grad_fn(t):
    """A tensor's autograd node, or None: without a graph, or where a
    subclass's attribute raises (the census must not)."""
    try:
        return t.grad_fn
    except Exception:
        return None


def walk(root, seen, cap, order=None):
    """Adds to ``seen`` the autograd nodes reachable from ``root`` (itself
    included) through ``next_functions`` (and to ``order``, when given, in
    the order found); returns True when it stopped because ``seen`` reached
    ``cap`` nodes."""
    return run(walk_steps(root, seen, cap, order))


def walk_steps(root, seen, cap, order=None, every=STEP_NODES):
    """``walk`` as a generator that pauses (yields) every ``every`` nodes,
    so that a census can let the job run between pieces of a long graph (a
    graph is not changed once made: the walk resumes where it was)."""
    seen.add(root)
    if order is not None:
        order.append(root)
    stack = [root]
    done = 0
    while stack:
        if len(seen) >= cap:
            return True
        done += 1
        if done % every == 0:
            yield
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
                if order is not None:
                    order.append(nxt)
    return len(seen) >= cap


# AccumulateGrad nodes carry the largest sequence number (they run first in
# backward): they tell nothing about when a graph was made.
_NO_SEQ = 1 << 62


def oldest(root, cap):
    """``oldest_steps`` in one piece."""
    return run(oldest_steps(root, cap))


def oldest_steps(root, cap, every=STEP_NODES):
    """Sequence numbers (the per-thread counter torch stamps on each node it
    makes) of ``root`` and of the oldest node found by following, from it,
    the oldest input at each node, for at most ``cap`` hops; None when this
    torch has no sequence numbers. A graph chained step to step
    (``total += loss``) is one long path back to its first step, walked in
    a hop per step, long after a node count has hit its cap."""
    try:
        newest = lo = root._sequence_nr()
    except Exception:
        return None
    if newest >= _NO_SEQ:
        return None
    node = root
    hops = 0
    while hops < cap:
        if hops and hops % every == 0:
            yield
        best = None
        best_seq = 0
        try:
            nexts = node.next_functions
        except Exception:
            break
        for pair in nexts:
            nxt = pair[0]
            if nxt is None:
                continue
            try:
                s = nxt._sequence_nr()
            except Exception:
                continue
            if s < _NO_SEQ and (best is None or s < best_seq):
                best, best_seq = nxt, s
        if best is None:
            break
        node = best
        hops += 1
        if best_seq < lo:
            lo = best_seq
    return lo, newest
