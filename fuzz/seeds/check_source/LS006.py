import torch
import torch.nn as nn
import torchvision

model = torchvision.models.resnet18()
activations = {}
feature_log = []


def save_activation(name):
    def hook(module, input, output):
        activations[name] = output  # expect: LS006
    return hook


def log_features(module, inp, out):
    pooled = out.mean(dim=(2, 3))
    feature_log.append(pooled)  # expect: LS006


for name, layer in model.named_children():
    layer.register_forward_hook(save_activation(name))
model.layer4.register_forward_hook(log_features)


class GradCAM:
    def __init__(self, model, layer):
        self.model = model
        self.activations = None
        self.gradients = None
        self.grad_history = []
        self.inputs = {}
        layer.register_forward_hook(self.save_activations)
        layer.register_full_backward_hook(self.save_gradients)

    def save_activations(self, module, input, output):
        self.activations = output  # expect: LS006
        self.inputs[module] = input[0].cpu()  # expect: LS006

    def save_gradients(self, module, grad_input, grad_output):
        self.gradients = grad_output[0]
        self.grad_history.append(grad_output[0])  # expect: LS006


class FeatureCollector:
    def __init__(self):
        self.features = []

    def forward_hook(self, module, inputs, outputs):
        for o in outputs:
            self.features.append(o.clone())  # expect: LS006


def attach(net):
    captured = []

    def capture(module, inp, output):
        captured.append(output[0])  # expect: LS006
        module.last_output = output  # expect: LS006

    net.register_forward_hook(capture)
    return captured
