import torch
import torch.nn.functional as F


class Trainer:
    def __init__(self, model):
        self.model = model
        self.best_agent = None
        self.cache = {}

    def replace_best(self, agent):
        # Drops the reference the object holds: frees the old agent.
        del self.best_agent
        self.best_agent = agent.clone()

    def evict(self, key):
        del self.cache[key]


def train(model, loader, optimizer):
    for x, y in loader:
        out = model(x)
        loss = F.mse_loss(out, y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        # Nothing else holds `out`: freeing it before the next forward lowers the peak.
        del out, loss


def stream(loader, model):
    for batch in loader:
        model(batch)
        # The loader holds no batch: this frees it before the next one is loaded.
        del batch


def finetune(path):
    model = torch.load(path)
    state = model.state_dict()
    # The last reference to the old model goes before a large allocation.
    del model
    big = torch.zeros(1 << 28)
    return state, big


def summarise(rows):
    table = build_table(rows)
    text = render(table)
    del table
    return render_footer(text)


def build_table(rows):
    return rows


def render(table):
    return str(table)


def render_footer(text):
    return text


def format_error(exc_type):
    import sys
    info = sys.exc_info()
    text = str(info[1])
    # Breaks the frame <-> traceback cycle: the documented idiom.
    del info
    return text


def make_walker(tree):
    def walk(node):
        return [walk(c) for c in node.children]

    result = walk(tree)
    # Breaks the closure's reference cycle.
    del walk
    return result


def enable_warnings():
    import warnings
    warnings.filterwarnings("default")
    del warnings


def run_tasks(context, tasks):
    for task in list(tasks):
        context.task = task
        task.run()
        del context.task
        del task
