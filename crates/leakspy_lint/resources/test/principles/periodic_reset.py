# Totals and lists of losses reset only when a logging window ends (`if step % n == 0`): until
# then each keeps the graph of every step of the window, as a total reset every epoch keeps the
# epoch's.
import torch
import torch.nn as nn

model = nn.Linear(16, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
logging_step = 100


def batches():
    for _ in range(1000):
        yield torch.randn(8, 16), torch.randint(0, 2, (8,))


for epoch in range(3):
    step = 1
    train_loss = 0
    window = []
    for x, y in batches():
        loss = nn.functional.cross_entropy(model(x), y)
        train_loss += loss  # expect: LS001
        window.append(loss)  # expect: LS002
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        step += 1
        if step % logging_step == 0:
            print(f"loss = {train_loss.item() / logging_step:.3f}")
            print(torch.stack(window).mean().item())
            train_loss = 0
            window.clear()
