# The same hooks while their registration lasts one call: on a tensor the call makes (it goes
# with the tensor), or with handles the function removes or hands to its caller to remove.
import torch


def input_gradients(model, x):
    x = x.clone().requires_grad_(True)
    out = model(x)
    grads = []

    def keep(grad):
        grads.append(grad.cpu())

    x.register_hook(keep)
    for i in range(out.shape[1]):
        out[:, i].sum().backward(retain_graph=True)
    return torch.stack(grads)


def attach(layer, store):
    def keep(module, grad_input, grad_output):
        store.append(grad_output[0])

    handles = []
    handles.append(layer.register_full_backward_hook(keep))
    return handles


def saliency(model, x, y):
    store = []
    handles = attach(model[0], store)
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    for h in handles:
        h.remove()
    return store


def layer_grads(model, batches):
    seen = []

    def keep(module, grad_input, grad_output):
        seen.append(grad_output[0].norm())

    handle = model.register_full_backward_hook(keep)
    for x in batches:
        model(x).sum().backward()
    handle.remove()
    return seen


def class_gradients(model, x):
    x = x.clone().requires_grad_(True)
    out = model(x)
    collected = []

    def save_grad():
        def hook(grad):
            collected.append(grad.cpu().numpy().copy())

        return hook

    x.register_hook(save_grad())
    for i in range(out.shape[1]):
        out[:, i].sum().backward(retain_graph=True)
    return collected
