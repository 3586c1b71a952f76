"""Work the probe does in pieces between the job's steps: generators that
yield where the job may run, and what their suspended frames hold."""

import gc
import os
import types

_HERE = os.path.dirname(os.path.abspath(__file__)) + os.sep
# Ids of the probe's own containers of the job's objects kept between steps
# (the values of the locals a census snapshotted): they hold nothing for
# the job.
kept = set()
_GEN = types.GeneratorType
_FRAME = types.FrameType


def run(gen):
    """Runs a generator of pieces of work to its end: its return value."""
    while True:
        try:
            next(gen)
        except StopIteration as e:
            return e.value


def is_ours(o):
    """Whether ``o`` is a frame or a generator of the probe's own code: a
    census or holder search suspended between steps keeps what it looks at
    in its locals, which makes it no holder of theirs."""
    t = type(o)
    if t is _GEN:
        code = o.gi_code
    elif t is _FRAME:
        code = o.f_code
    else:
        return False
    f = code.co_filename
    return isinstance(f, str) and f.startswith(_HERE)


# Objects looked into between two pauses of a referrer scan (a few ms).
SCAN_CHUNK = 4000


def referrers(pool, ids, skip=()):
    """The objects of ``pool`` that refer to an object whose id is in
    ``ids`` (a set), but for those whose id is in ``skip``: what
    ``gc.get_referrers`` gives, as a generator that pauses between chunks
    of the pool. A chunk none of whose referents is wanted is passed over
    in C; gc.get_referrers compares every reference of the heap with every
    object it is given, at once."""
    out = []
    get = gc.get_referents
    for start in range(0, len(pool), SCAN_CHUNK):
        if start:
            yield
        chunk = pool[start:start + SCAN_CHUNK]
        try:
            if ids.isdisjoint(map(id, get(*chunk))):
                continue
        except Exception:
            pass
        for r in chunk:
            if id(r) in skip:
                continue
            try:
                if not ids.isdisjoint(map(id, get(r))):
                    out.append(r)
            except Exception:
                continue
        r = chunk = None
    return out
