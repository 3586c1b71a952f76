# State set afresh at the start of each call, then carried through it: one call's graph only.
import torch
import torch.nn as nn


class Tagger(nn.Module):
    def __init__(self, vocab, dim):
        super().__init__()
        self.dim = dim
        self.embed = nn.Embedding(vocab, dim)
        self.lstm = nn.LSTM(dim, dim)
        self.hidden = self.init_hidden()

    def init_hidden(self):
        return (torch.zeros(1, 1, self.dim), torch.zeros(1, 1, self.dim))

    def forward(self, sentence):
        self.hidden = self.init_hidden()
        embeds = self.embed(sentence).view(len(sentence), 1, -1)
        out, self.hidden = self.lstm(embeds, self.hidden)
        return out
