# State carried from the previous call with its graph: every call links to the one before.
import torch
import torch.nn as nn


class Tagger(nn.Module):
    def __init__(self, vocab, dim):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.lstm = nn.LSTM(dim, dim)
        self.hidden = self.init_hidden(dim)

    def init_hidden(self, dim):
        return (torch.zeros(1, 1, dim), torch.zeros(1, 1, dim))

    def forward(self, sentence):
        embeds = self.embed(sentence).view(len(sentence), 1, -1)
        out, self.hidden = self.lstm(embeds, self.hidden)  # expect: LS007
        return out
