# A returned tuple is several values: the element that carries a graph is still reported.
import torch.nn.functional as F


def regularize(h):
    mean = h.pow(2).mean()
    return mean * 0.1, mean.detach(), h.norm(dim=-1)


def step_outputs(model, x, y):
    logits = model(x)
    loss = F.cross_entropy(logits, y)
    return {"loss": loss, "n": len(y)}


def train(model, loader, opt):
    kept, losses, pairs, best = [], [], [], []
    for x, y in loader:
        loss, mean_len, lengths = regularize(model(x))
        loss.backward()
        opt.step()
        kept.append(lengths)  # expect: LS002
        out = step_outputs(model, x, y)
        losses.append(out["loss"])  # expect: LS002
        for l, n in zip([out["loss"]], [out["n"]]):
            pairs.append(l)  # expect: LS002
        values, _ = model(x).max(1)
        best.append(values)  # expect: LS002
    return kept, losses, pairs, best
