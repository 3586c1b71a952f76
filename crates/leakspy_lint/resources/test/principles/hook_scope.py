# A hook closing over a list, registered on the model the caller passes in, its handle dropped:
# the hook stays on the model, and the list grows with every backward pass after the call.
import torch


def track_input_grads(model):
    grads = []

    def keep(module, grad_input, grad_output):
        grads.append(grad_output[0])  # expect: LS006

    model.register_full_backward_hook(keep)
    return grads


def train(model, loader, opt):
    grads = track_input_grads(model)
    for x, y in loader:
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return grads
