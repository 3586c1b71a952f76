# A sampler whose result starts from a parameter: `chars = [start]`. Every caller passes a
# number there, so the list it returns carries no graph, and the graph its loop links through
# the recurrent state can never be used.
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
    inp = torch.tensor([[start]])
    hidden = None
    chars = [start]
    for _ in range(length):
        logits, hidden = model(inp, hidden)  # expect: LS008
        nxt = torch.multinomial(torch.softmax(logits[0, -1], dim=-1), 1).item()
        chars.append(nxt)
        inp = torch.tensor([[nxt]])
    return chars


def main():
    print(generate(CharRNN(), 1, 2000))


main()
