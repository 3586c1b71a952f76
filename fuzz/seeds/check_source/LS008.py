import torch
import torch.nn as nn
import torch.nn.functional as F


class LanguageModel(nn.Module):
    def __init__(self, vocab, hidden):
        super().__init__()
        self.embed = nn.Embedding(vocab, hidden)
        self.rnn = nn.LSTM(hidden, hidden)
        self.head = nn.Linear(hidden, vocab)

    def forward(self, tokens, state):
        out, state = self.rnn(self.embed(tokens), state)
        return self.head(out), state


def train_epoch(model, batches, optimizer, batch_size):
    hidden = None
    for data, targets in batches:
        optimizer.zero_grad()
        output, hidden = model(data, hidden)  # expect: LS008
        loss = F.cross_entropy(output.flatten(0, 1), targets.flatten())
        loss.backward(retain_graph=True)
        optimizer.step()


def train_cell(cell, head, sequence, optimizer):
    h = torch.zeros(1, 32)
    for t, (x, y) in enumerate(sequence):
        h = cell(x, h)  # expect: LS008
        loss = F.mse_loss(head(h), y)
        loss.backward(retain_graph=True)
        optimizer.step()


def train_lstm_tuple(lstm, head, loader, optimizer):
    h = torch.zeros(1, 4, 16)
    c = torch.zeros(1, 4, 16)
    for epoch in range(10):
        for x, y in loader:
            out, (h, c) = lstm(x, (h, c))  # expect: LS008
            loss = F.mse_loss(head(out), y)
            loss.backward(retain_graph=True)
            optimizer.step()


def train_partial_detach(lstm, head, loader, optimizer):
    h = torch.zeros(1, 4, 16)
    c = torch.zeros(1, 4, 16)
    for x, y in loader:
        h = h.detach()
        out, (h, c) = lstm(x, (h, c))  # expect: LS008
        F.mse_loss(head(out), y).backward(retain_graph=True)
        optimizer.step()


def train_sequences_no_reset(cell, head, sequences, optimizer):
    h = torch.zeros(1, 32)
    for xs, y in sequences:
        for x in xs:
            h = cell(x, h)  # expect: LS008
        loss = F.mse_loss(head(h), y)
        loss.backward(retain_graph=True)
        optimizer.step()


class StatefulTrainer:
    def __init__(self, model, optimizer):
        self.model = model
        self.optimizer = optimizer
        self.hidden = None

    def training_step(self, model, x, y):
        out, self.hidden = model(x, self.hidden)  # expect: LS008
        loss = F.mse_loss(out, y)
        loss.backward(retain_graph=True)
        self.optimizer.step()
        return loss.item()
