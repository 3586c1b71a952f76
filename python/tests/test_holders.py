"""The holder search on real torch objects, in this process: what a user
keeps is named by the user's own root, not by torch's bookkeeping on the way
(`Actor._modules`, `Linear._parameters`, `Adam.state`); a library's root is
named only when nothing of the user's holds the object."""

import copy
import json

import pytest

torch = pytest.importorskip("torch")

from leakspy._census import Libraries  # noqa: E402
from leakspy._holders import Searcher  # noqa: E402


class Actor(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(),
                                       torch.nn.Linear(8, 2))

    def forward(self, x):
        return self.net(x)


class Trainer:
    def __init__(self):
        self.actor = Actor()
        self.optimizer = torch.optim.Adam(self.actor.parameters(), lr=1e-3)
        self.hall_of_fame = []

    def step(self):
        loss = self.actor(torch.randn(16, 4)).pow(2).mean()
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        self.hall_of_fame.append(copy.deepcopy(self.actor))


def search(groups):
    """Holders of each group (a list of lists, which the search ignores:
    no local may hold the objects), with no rising types to pass through
    (what a census may not have seen rise)."""
    searcher = Searcher(Libraries(None), through=())
    try:
        return searcher.search(groups)
    finally:
        searcher.close()


def test_parts_of_kept_models_are_held_by_the_users_list():
    trainer = Trainer()
    for _ in range(3):
        trainer.step()
    found = search([
        [a.net for a in trainer.hall_of_fame],  # Actor._modules on the way
        [a.net[0].weight for a in trainer.hall_of_fame],  # Linear._parameters, Sequential, Actor
    ])
    for h in found:
        assert (h["kind"], h["path"], h["container"]) == (
            "attribute", "Trainer.hall_of_fame", "list"), found
    assert found[1]["chain"][0] == "Parameter" and found[1]["chain"][-1] == "Trainer", found


class Encoder(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Linear(4, 4)
        self.register_buffer("running_norm", torch.zeros(()))

    def forward(self, x):
        out = self.net(x)
        self.running_norm = 0.99 * self.running_norm + 0.01 * out.norm()
        return out


class Model:
    def __init__(self):
        self.encoder = Encoder()


def test_a_buffer_of_the_users_module_is_named_by_its_attribute():
    # A running statistic rebinding a registered buffer with a graph (a
    # chain): the user's attribute, `Encoder.running_norm`, not torch's
    # registry nor what holds the model.
    model = Model()
    for _ in range(3):
        model.encoder(torch.randn(2, 4))
    (h,) = search([[model.encoder.running_norm]])
    assert (h["kind"], h["path"]) == ("attribute", "Encoder.running_norm"), h
    # A buffer of torch's own module stays torch's bookkeeping: the user's
    # attribute that keeps the module is named.
    bn = torch.nn.BatchNorm1d(4)
    model.norm = bn
    (h,) = search([[bn.running_mean]])
    assert h["path"] == "Model.norm", h


def test_optimizer_state_is_held_by_the_attribute_keeping_the_optimizer():
    trainer = Trainer()
    trainer.step()
    (h,) = search([[s["exp_avg"] for s in trainer.optimizer.state.values()]])
    assert (h["kind"], h["path"]) == ("attribute", "Trainer.optimizer"), h
    assert "Adam" in h["chain"], h


def test_a_model_only_a_library_keeps_is_named_by_the_librarys_root():
    json._leakspy_test_model = torch.nn.Linear(3, 3)
    try:
        (h,) = search([[json._leakspy_test_model.weight]])
    finally:
        del json._leakspy_test_model
    assert (h["kind"], h["path"]) == ("global", "json._leakspy_test_model"), h


class AsyncValidator:
    def __init__(self):
        import queue

        self.results = queue.Queue()


def test_a_librarys_object_is_passed_on_the_way_to_the_users():
    # Queue keeps its items in a deque: the user's object holding the
    # queue is the holder, with the deque's id to join its length to.
    v = AsyncValidator()
    losses = [torch.randn(3).sum() for _ in range(4)]
    for loss in losses:
        v.results.put(loss)
    (h,) = search([list(losses)])
    del losses
    assert (h["kind"], h["path"]) == ("attribute", "AsyncValidator.results"), h
    assert h["chain"][-2:] == ["Queue", "AsyncValidator"], h
    assert h["container_id"] == id(v.results.queue), h
    assert not h.get("library"), h


class Record:
    pass


class Recorder:
    def __init__(self):
        self.frames = []


def test_a_holder_reaches_what_it_keeps_in_other_series():
    import functools
    import weakref

    import numpy as np

    rec = Recorder()
    for i in range(5):
        r = Record()
        r.image = np.zeros(4)
        r.callback = functools.partial(print, i)
        r.ref = weakref.ref(rec)
        rec.frames.append(r)
    searcher = Searcher(Libraries(None), through=(Record, functools.partial, weakref.ref))
    try:
        (h,) = searcher.search([list(rec.frames)])
    finally:
        searcher.close()
    assert h["path"] == "Recorder.frames", h
    # (Record itself is what was searched for: passed through, and counted.)
    assert h["reaches"] == ["numpy", "type:functools.partial", "type:test_holders.Record",
                            "type:weakref.ReferenceType"], h


class LossLog:
    def __init__(self):
        self.losses = []


def test_a_holder_reaches_the_tensor_series_of_what_it_keeps():
    model = torch.nn.Linear(4, 1)
    log = LossLog()
    for _ in range(3):
        loss = model(torch.randn(8, 4)).pow(2).mean()
        log.losses.append((loss, torch.zeros(2), torch.zeros(2, dtype=torch.float64)))
    searcher = Searcher(Libraries(None), through=(tuple,))
    try:
        (h,) = searcher.search([[t[0] for t in log.losses]])
    finally:
        searcher.close()
    assert h["path"] == "LossLog.losses", h
    tensors = [k for k in h["reaches"] if k.startswith("tensors:")]
    # Each kind it keeps by references, by the census's own keys; not the
    # parameters the losses' graphs save (out of a walk's sight, and a
    # model's).
    assert tensors == ["tensors:cpu/float32/grad", "tensors:cpu/float32/plain",
                       "tensors:cpu/float64/plain"], h


class History:
    def __init__(self):
        self.history = {"train": [], "val": []}
        self.runs = [[], []]


def test_entries_of_one_holder_are_told_apart_by_their_key():
    h = History()
    for i in range(3):
        h.history["train"].append(torch.ones(1) * i)
        h.history["val"].append(torch.ones(1) * -i)
        h.runs[1].append(torch.ones(2))
    train, val, run = search([[h.history["train"]], [h.history["val"]], [h.runs[1]]])
    assert (train["path"], train["key"]) == ("History.history", "['train']"), train
    assert (val["path"], val["key"]) == ("History.history", "['val']"), val
    assert (run["path"], run["key"]) == ("History.runs", "[1]"), run
    # The holder itself has no key: the list it names is the growing object.
    (whole,) = search([[h.history["train"][0]]])
    assert whole["path"] == "History.history" and "key" not in whole, whole


def _keep_records(store, n):
    for i in range(n):
        store.append([float(i), float(i) * 2.0])  # the leak's line


def test_the_creation_site_of_a_containers_items_is_found_among_few_ids():
    # While tracemalloc runs, an id is an allocation it records with its
    # traceback: the lookup gives ids only to containers about as long as
    # the wanted one was, and still finds one trimmed since it was seen.
    import gc
    import tracemalloc

    from leakspy import _explain

    line = _keep_records.__code__.co_firstlineno + 2
    smalls = [[i] * 9 for i in range(20000)]  # a heap of short containers
    kept, trimmed = [], []
    tracemalloc.start(16)
    try:
        _keep_records(kept, 400)
        _keep_records(trimmed, 400)
        del trimmed[:350]  # half of what was seen, and less
        lens = {id(kept): 400, id(trimmed): 400}
        keys = ["container:%d" % id(kept), "container:%d" % id(trimmed)]
        objs = gc.get_objects()
        sel_types = list(map(type, objs))
        found = _explain._ContainersById(None, objs, sel_types, set(), lens)
        assert found.get(id(kept)) is kept
        assert len(found.by_id) < 2000  # not the 20,000 short lists
        assert found.get(id(trimmed)) is trimmed  # after a wider look
        del found, objs, sel_types
        sites = _explain.sites(Libraries(None), None, keys, tracemalloc, lens=lens)
    finally:
        tracemalloc.stop()
    assert len(smalls) == 20000
    for key in keys:
        f, got = sites[key]
        assert f == __file__ and got == line, (key, sites[key])


def test_a_variable_holding_one_instance_is_no_holder_of_a_count_but_of_a_chain():
    from leakspy import _explain

    def run_step(w):
        # The step's batch, and its loss whose graph saved the batch: each
        # is one instance, held by a variable of the running step.
        batch = torch.randn(8, 4)
        loss = (batch * w).sum()
        found = _explain.attribute(Libraries(None), [
            ("tensors:cpu/float32/plain", 1.0, 10, {"objects": [batch], "kind": "instances"}),
            ("tensors:cpu/float32/grad", 1.0, 10, {"objects": [loss], "kind": "instances"}),
            ("graph.largest", 5.0, 50, {"objects": [loss], "kind": "graph"}),
        ])
        return [h and (h["kind"], h["path"]) for h, _bounded, _picked in found]

    w = torch.ones(4, requires_grad=True)
    holders = run_step(w)
    # Counts of instances: one in a variable is not their growth. The
    # largest graph: the variable holding its root holds all of it.
    assert holders[:2] == [None, None], holders
    assert holders[2] == ("local", "test_a_variable_holding_one_instance_is_no_holder_of_a_"
                          "count_but_of_a_chain.<locals>.run_step:loss"), holders


def test_a_variable_holding_a_graph_other_than_the_biggest_is_no_holder_of_all_graphs():
    from leakspy import _explain

    def run_step(w, chain):
        # The step's loss, held by the running step; the chain the step's
        # output feeds (the biggest graph) is held elsewhere, and the loss
        # does not reach it.
        loss = (torch.randn(8, 4) * w).sum()
        found = _explain.attribute(Libraries(None), [
            # The biggest graph first (`best` of them), then the youngest roots.
            ("graph", 5.0, 50, {"objects": [loss], "kind": "instances", "best": 0}),
            ("graph", 5.0, 50, {"objects": [loss], "kind": "instances", "best": 1}),
        ])
        return [h and (h["kind"], h["path"]) for h, _bounded, _picked in found]

    w = torch.ones(4, requires_grad=True)
    chain = w.sum()
    for _ in range(5):
        chain = chain + (w * 2.0).sum()
    holders = run_step(w, chain)
    # A young root: one step's graph. The biggest graph's root: all of it.
    assert holders[0] is None, holders
    assert holders[1] is not None and holders[1][0] == "local", holders


class Stats:
    """A running statistic updated from values with a graph: a chain."""

    def __init__(self):
        self.total = torch.zeros(())


def test_graphs_fed_by_two_leaks_name_both_holders():
    # One series (all autograd graphs) grows from two leaks: losses kept in
    # a trainer's list, and a running statistic chained from step to step.
    w = torch.ones(4, requires_grad=True)
    trainer = Trainer()
    stats = Stats()
    for _ in range(6):
        loss = (torch.randn(8, 4) * w).sum()
        trainer.hall_of_fame.append(loss)
        stats.total = stats.total + (torch.randn(4) * w).sum()
    loss = None
    group = trainer.hall_of_fame[-3:] + [stats.total]
    (h,) = search([group])
    assert h is not None
    named = {h["path"]} | {a["path"] for a in h.get("also", [])}
    assert named == {"Trainer.hall_of_fame", "Stats.total"}, h
    # Each with the share of the objects that reached it.
    assert h["share"] == pytest.approx(0.75), h
    (other,) = h["also"]
    assert other["path"] == "Stats.total" and other["share"] == pytest.approx(0.25), h
    assert other["kind"] == "attribute" and other.get("line"), other


def test_one_holder_alone_has_no_others():
    trainer = Trainer()
    for _ in range(3):
        trainer.hall_of_fame.append(torch.randn(3, requires_grad=True) * 2)
    (h,) = search([list(trainer.hall_of_fame)])
    assert h["path"] == "Trainer.hall_of_fame"
    assert "also" not in h and "share" not in h, h
