# A local of a function that runs once, filled for `range(100)` epochs, keeps a graph per epoch
# for the whole run: the epochs are the run's length.
import torch
import torch.nn as nn

EPOCHS = 100


def main(model: nn.Module, x_val, batches):
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    val_outputs = []
    for epoch in range(EPOCHS):
        for x, y in batches:
            loss = nn.functional.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        val_outputs.append(model(x_val))  # expect: LS002
