# A returned tuple is several values: each element keeps its own provenance through returns,
# unpacking, dict keys and `zip`.
import torch.nn.functional as F


def regularize(h):
    mean = h.pow(2).mean()
    lengths = h.norm(dim=-1)
    return mean * 0.1, mean.detach(), lengths.detach()


def evaluate_batch(model, x, y):
    logits = model(x)
    n_correct = (logits.argmax(-1) == y).sum().item()
    return F.cross_entropy(logits, y), n_correct


def step_outputs(model, x, y):
    logits = model(x)
    loss = F.cross_entropy(logits, y)
    return {"loss": loss, "n": len(y), "acc": (logits.argmax(-1) == y).float().mean().item()}


def train(model, loader, opt):
    mean_lens, corrects, accs, sizes, pairs, preds = [], [], [], [], [], []
    for x, y in loader:
        h = model(x)
        loss, mean_len, lengths = regularize(h)
        loss.backward()
        opt.step()
        mean_lens.append(mean_len)
        loss2, n_correct = evaluate_batch(model, x, y)
        corrects.append(n_correct)
        out = step_outputs(model, x, y)
        accs.append(out["acc"])
        sizes.append(out.get("n"))
        for l, n in zip([loss2], [n_correct]):
            pairs.append(n)
        # The indices of `max(dim)`, `topk` and `sort` carry no graph; only their values do.
        _, idx = model(x).max(1)
        preds.append(idx)
        preds.append(model(x).topk(3).indices)
    return mean_lens, corrects, accs, sizes, pairs, preds
