"""The entry that was backpropagated is detached before the dict is kept."""
import torch


def train(module, loader, optimizer, epochs=10):
    for epoch in range(epochs):
        outputs = []
        for i, batch in enumerate(loader):
            optimizer.zero_grad()
            output = module.training_step(batch, i)
            output["loss"].backward()
            optimizer.step()
            output["loss"] = output["loss"].detach()
            outputs.append(output)
        module.training_epoch_end(outputs)
