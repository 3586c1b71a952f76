# The same sampler three ways that link no steps: a helper that detaches the state it is given
# before the model sees it, one that hands the state back without running it through anything,
# and a sampler run under no_grad.
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class CharRNN(nn.Module):
    def __init__(self, chars, n_hidden=64):
        super().__init__()
        self.chars = chars
        self.lstm = nn.LSTM(len(chars), n_hidden, batch_first=True)
        self.fc = nn.Linear(n_hidden, len(chars))

    def forward(self, x, hidden):
        out, hidden = self.lstm(x, hidden)
        return self.fc(out[:, -1]), hidden


def encode(net, char):
    x = torch.zeros(1, 1, len(net.chars))
    x[0, 0, net.chars.index(char)] = 1.0
    return x


def predict(net, char, h=None):
    if h is not None:
        h = tuple([each.data for each in h])
    out, h = net(encode(net, char), h)
    p = F.softmax(out, dim=1).data.numpy().squeeze()
    return net.chars[np.random.choice(len(p), p=p / p.sum())], h


def greedy(net, char, h):
    out, _ = net(encode(net, char), None)
    return net.chars[int(out.argmax())], h


def sample(net, size, prime="the"):
    chars = list(prime)
    h = None
    for _ in range(size):
        char, h = predict(net, chars[-1], h)
        chars.append(char)
    return "".join(chars)


def sample_greedy(net, size):
    chars = ["a"]
    h = torch.zeros(1, 1, 64)
    for _ in range(size):
        char, h = greedy(net, chars[-1], h)
        chars.append(char)
    return "".join(chars)


@torch.no_grad()
def sample_quiet(net, size):
    chars = ["a"]
    h = None
    for _ in range(size):
        out, h = net(encode(net, chars[-1]), h)
        chars.append(net.chars[int(out.argmax())])
    return "".join(chars)


if __name__ == "__main__":
    model = CharRNN(tuple("abcdefgh "))
    print(sample(model, 2000), sample_greedy(model, 2000), sample_quiet(model, 2000))
