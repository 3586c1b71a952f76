# Losses gathered over a few micro-batches and backpropagated together consume the list, which
# starts afresh for each step: nothing is kept past the step.
import torch


def fit(params, loss_function, make_optimizer, max_iter=1000, accumulate=4):
    optimizer = make_optimizer(params)
    history = []
    for it in range(max_iter):
        optimizer.zero_grad()
        losses = []
        for _ in range(accumulate):
            losses.append(loss_function(*params))
        total = torch.stack(losses).mean()
        total.backward()
        optimizer.step()
        history.append(total.item())
    return history
