# A sampler whose recurrent step lives in a helper: `predict` feeds the state it is given to the
# model and returns the new one, so the loop that calls it carries the state through the model
# one level down, with autograd on and nothing to backpropagate.
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


def predict(net, char, h=None):
    x = torch.zeros(1, 1, len(net.chars))
    x[0, 0, net.chars.index(char)] = 1.0
    out, h = net(x, h)
    p = F.softmax(out, dim=1).data.numpy().squeeze()
    return net.chars[np.random.choice(len(p), p=p / p.sum())], h


def sample(net, size, prime="the"):
    chars = list(prime)
    h = None
    for ch in prime:
        char, h = predict(net, ch, h)  # expect: LS008
    chars.append(char)
    for _ in range(size):
        char, h = predict(net, chars[-1], h)  # expect: LS008
        chars.append(char)
    return "".join(chars)


if __name__ == "__main__":
    model = CharRNN(tuple("abcdefgh "))
    print(sample(model, 2000))
