# A leaky neuron whose membrane potential is carried from call to call and never reset: each
# forward links its graph to every earlier one for the life of the module.
import torch
import torch.nn as nn


class BaseNode(nn.Module):
    def __init__(self, threshold=1.0):
        super().__init__()
        self.threshold = threshold
        self.v = 0.0


class LIFNode(BaseNode):
    def __init__(self, tau=2.0):
        super().__init__()
        self.tau = tau

    def forward(self, dv):
        self.v = torch.tanh(self.v / self.tau + dv)  # expect: LS007
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
