import torch
import torch.nn as nn
import torchvision

model = torchvision.models.resnet18()
activations = {}
shapes = []
norms = []


def save_activation(name):
    def hook(module, input, output):
        activations[name] = output.detach()
    return hook


def record_shape(module, inp, out):
    shapes.append(tuple(out.shape))
    norms.append(out.norm().item())


def numpy_hook(module, inp, out):
    activations["np"] = out.detach().cpu().numpy()


for name, layer in model.named_children():
    layer.register_forward_hook(save_activation(name))
model.layer4.register_forward_hook(record_shape)
model.fc.register_forward_hook(numpy_hook)


class GradCAM:
    def __init__(self, model, layer):
        self.model = model
        self.activations = None
        self.gradients = None
        layer.register_forward_hook(self.save_activations)
        layer.register_full_backward_hook(self.save_gradients)

    def save_activations(self, module, input, output):
        self.activations = output.detach()

    def save_gradients(self, module, grad_input, grad_output):
        # Gradients carry no graph; one tensor is replaced per call.
        self.gradients = grad_output[0]


class Stats:
    def __init__(self):
        self.means = []

    def stats_hook(self, module, inputs, outputs):
        with torch.no_grad():
            mean = outputs.mean()
        self.means.append(mean)
        local = outputs * 2
        print(local.shape)


def clip_hook(grad):
    # A tensor hook returning a new gradient stores nothing.
    return grad.clamp(-1, 1)


def cleanup_hook(handles):
    # Named like a hook, but takes no tensor: not a hook.
    for h in handles:
        h.remove()
    handles.clear()


def make_hook(name):
    # The factory itself stores nothing received.
    registry = []
    registry.append(name)

    def hook(module, input, output):
        activations[name] = output.detach().clone()

    return hook


model.layer1.register_forward_hook(make_hook("layer1"))


def extract_features(net, x):
    feats = {}

    def hook(module, input, output):
        feats["x"] = output

    handle = net.register_forward_hook(hook)
    with torch.no_grad():
        net(x)
    handle.remove()
    return feats["x"]
