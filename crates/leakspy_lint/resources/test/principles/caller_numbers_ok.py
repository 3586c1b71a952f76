# The same sampler where the caller passes a tensor the model made: the list it returns keeps
# that tensor's graph, and the caller may backpropagate through what it gets back.
import torch
import torch.nn as nn


class CharRNN(nn.Module):
    def __init__(self, vocab=64, hidden=128):
        super().__init__()
        self.emb = nn.Embedding(vocab, hidden)
        self.rnn = nn.GRU(hidden, hidden, batch_first=True)
        self.out = nn.Linear(hidden, vocab)

    def forward(self, x, h=None):
        y, h = self.rnn(self.emb(x), h)
        return self.out(y), h


def generate(model, start, length):
    inp = torch.tensor([[0]])
    hidden = None
    chars = [start]
    for _ in range(length):
        logits, hidden = model(inp, hidden)
        nxt = torch.multinomial(torch.softmax(logits[0, -1], dim=-1), 1).item()
        chars.append(nxt)
        inp = torch.tensor([[nxt]])
    return chars


def main():
    model = CharRNN()
    seed = model.out(torch.randn(1, 128))
    print(generate(model, seed, 20))


main()
