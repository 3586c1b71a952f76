# A spiking neuron's membrane potential: forward adds the input current into `self.v` and fires
# from it (through a method of its base that reads `self.v`), and the base's `reset()` clears it
# between samples. The state is part of the computation backpropagated through time, not a
# total kept on the side.
import torch
import torch.nn as nn


class BaseNode(nn.Module):
    def __init__(self, v_threshold=1.0, v_reset=0.0):
        super().__init__()
        self.v_threshold = v_threshold
        self.v_reset = v_reset
        self.v = v_reset

    def spiking(self):
        spike = torch.sigmoid(4.0 * (self.v - self.v_threshold))
        self.v = self.v * (1.0 - spike) + self.v_reset * spike
        return spike

    def reset(self):
        self.v = self.v_reset


class IFNode(BaseNode):
    def forward(self, dv):
        self.v += dv
        return self.spiking()


class LeakyNode(BaseNode):
    def __init__(self, tau=2.0):
        super().__init__()
        self.tau = tau

    def forward(self, dv):
        self.v += dv
        out = self.v / self.tau
        return out


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)
        self.node = IFNode()
        self.leaky = LeakyNode()

    def forward(self, x):
        return self.leaky(self.node(self.fc(x)))

    def reset_(self):
        self.node.reset()
        self.leaky.reset()


def train(batches, steps=8):
    net = Net()
    optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
    for x in batches:
        out = 0
        for _ in range(steps):
            out = out + net(x)
        loss = out.sum()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        net.reset_()
