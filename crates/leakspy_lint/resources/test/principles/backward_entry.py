"""A dict whose entry is backpropagated holds that graph, whatever the analysis knows of where
the dict came from (a step method of another object, a framework's output)."""
import torch


def train(module, loader, optimizer, epochs=10):
    for epoch in range(epochs):
        outputs = []
        for i, batch in enumerate(loader):
            optimizer.zero_grad()
            output = module.training_step(batch, i)
            output["loss"].backward()
            optimizer.step()
            outputs.append(output)  # expect: LS002
        module.training_epoch_end(outputs)
