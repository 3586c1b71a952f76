# The same neuron with a `reset()` it inherits from its base, which rebinds the potential: the
# class manages its state, as when the method is its own (the training loop resets the network
# after each batch).
import torch
import torch.nn as nn


class BaseNode(nn.Module):
    def __init__(self, threshold=1.0):
        super().__init__()
        self.threshold = threshold
        self.v = 0.0

    def reset(self):
        self.v = 0.0


class LIFNode(BaseNode):
    def __init__(self, tau=2.0):
        super().__init__()
        self.tau = tau

    def forward(self, dv):
        self.v = torch.tanh(self.v / self.tau + dv)
        spike = (self.v > self.threshold).float()
        return spike + self.v - self.v.detach()


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.lif = LIFNode()

    def forward(self, x):
        return self.lif(self.fc(x))


def train(loader, opt):
    net = Net()
    for x, y in loader:
        out = net(x)
        loss = (out - y).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        net.lif.reset()
