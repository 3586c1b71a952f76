# The same logging window kept right: numbers added and kept, a total backpropagated when the
# window ends (gradient accumulation), and a total reset on every step and only logged.
import torch
import torch.nn as nn

model = nn.Linear(16, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
logging_step = 100
accumulate = 4


def batches():
    for _ in range(1000):
        yield torch.randn(8, 16), torch.randint(0, 2, (8,))


for epoch in range(3):
    step = 1
    train_loss = 0.0
    window = []
    pending = 0
    for x, y in batches():
        loss = nn.functional.cross_entropy(model(x), y)
        train_loss += loss.item()
        window.append(loss.item())
        pending = pending + loss / accumulate
        step += 1
        if step % accumulate == 0:
            pending.backward()
            optimizer.step()
            optimizer.zero_grad()
            pending = 0
        if step % logging_step == 0:
            print(f"loss = {train_loss / logging_step:.3f}", sum(window) / len(window))
            train_loss = 0.0
            window.clear()
