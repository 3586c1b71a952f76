"""Per-sample-gradient hooks (in the style of Opacus' GradSampleModule): a forward hook keeps each
layer's input for the backward hook, which consumes it. Evaluating the model under
`torch.no_grad()` while it is still in training mode runs the forward hooks but never the backward
ones, so the stored activations pile up batch after batch.

Source: meta-pytorch/opacus issue #176, "torch.no_grad() creates memory leak because of forward
hook" (the activations are saved and never deleted; `model.eval()` fixes it). Fix: store
activations only when autograd records (`torch.is_grad_enabled()`), and evaluate in eval mode.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F


class GradSampleModule(nn.Module):
    def __init__(self, module):
        super().__init__()
        self._module = module
        self.handles = []
        for layer in module.modules():
            if isinstance(layer, nn.Linear):
                layer.activations = []
                self.handles.append(layer.register_forward_hook(self.capture_activations_hook))
                self.handles.append(layer.register_full_backward_hook(self.capture_backprops_hook))

    def forward(self, x):
        return self._module(x)

    def capture_activations_hook(self, module, forward_input, forward_output):
        if not module.training or not torch.is_grad_enabled():
            return
        module.activations.append(forward_input[0].detach())

    def capture_backprops_hook(self, module, grad_input, grad_output):
        activations = module.activations.pop()
        backprops = grad_output[0].detach()
        module.weight.grad_sample = torch.einsum("ni,nj->nij", backprops, activations)


def train_and_validate(model, train_loader, val_loader, epochs=10):
    dp_model = GradSampleModule(model)
    optimizer = torch.optim.SGD(dp_model.parameters(), lr=0.05)
    for epoch in range(epochs):
        dp_model.train()
        for x, y in train_loader:
            optimizer.zero_grad()
            F.cross_entropy(dp_model(x), y).backward()
            optimizer.step()
        correct = 0
        dp_model.eval()
        with torch.no_grad():
            for x, y in val_loader:
                correct += (dp_model(x).argmax(1) == y).sum().item()
        print(f"epoch {epoch}: val accuracy {correct / len(val_loader.dataset):.3f}")
