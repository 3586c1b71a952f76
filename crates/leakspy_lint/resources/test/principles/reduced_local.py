# Views of per-step outputs kept in a list: handed back to the caller, whose list keeps every
# batch's whole logits alive; or kept through a training run (the loop trains) until it ends.
import torch


def last_token_logits(model, loader):
    last = []
    with torch.no_grad():
        for batch in loader:
            logits = model(batch)
            last.append(logits[:, -1])  # expect: LS005
    return last


def train(model, loader, optimizer):
    firsts = []
    for x, y in loader:
        out = model(x)
        loss = torch.nn.functional.mse_loss(out, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        firsts.append(out.detach()[:, 0])  # expect: LS005
    return torch.stack(firsts).mean()
