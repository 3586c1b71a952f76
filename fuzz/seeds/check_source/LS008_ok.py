import torch
import torch.nn as nn
import torch.nn.functional as F


def repackage_hidden(h):
    if isinstance(h, torch.Tensor):
        return h.detach()
    return tuple(repackage_hidden(v) for v in h)


def train_epoch(model, batches, optimizer, batch_size):
    hidden = model.init_hidden(batch_size)
    for data, targets in batches:
        hidden = repackage_hidden(hidden)
        optimizer.zero_grad()
        output, hidden = model(data, hidden)
        loss = F.cross_entropy(output.flatten(0, 1), targets.flatten())
        loss.backward()
        optimizer.step()


def detach_gru(cell, head, sequence, optimizer):
    h = torch.zeros(1, 32)
    for x, y in sequence:
        h = h.detach()
        h = cell(x, h)
        F.mse_loss(head(h), y).backward()
        optimizer.step()


def detach_lstm_tuple(lstm, head, loader, optimizer):
    state = None
    for x, y in loader:
        if state is not None:
            state = tuple(s.detach() for s in state)
        out, state = lstm(x, state)
        F.mse_loss(head(out), y).backward()
        optimizer.step()


def detach_after(lstm, head, loader, optimizer):
    h = torch.zeros(1, 4, 16)
    c = torch.zeros(1, 4, 16)
    for x, y in loader:
        out, (h, c) = lstm(x, (h, c))
        F.mse_loss(head(out), y).backward()
        optimizer.step()
        h, c = h.detach(), c.detach()


def detach_in_place(cell, head, loader, optimizer):
    h = torch.zeros(1, 32)
    for x, y in loader:
        h = cell(x, h)
        F.mse_loss(head(h), y).backward()
        optimizer.step()
        h.detach_()


def truncated_every_k(cell, head, sequence, optimizer, k=35):
    h = torch.zeros(1, 32)
    loss = 0
    for t, (x, y) in enumerate(sequence):
        h = cell(x, h)
        loss = loss + F.mse_loss(head(h), y)
        if (t + 1) % k == 0:
            loss.backward()
            optimizer.step()
            loss = 0
            h = h.detach()


def full_bptt(cell, head, sequences, optimizer):
    for xs, y in sequences:
        h = torch.zeros(1, 32)
        for x in xs:
            h = cell(x, h)
        loss = F.mse_loss(head(h), y)
        loss.backward()
        optimizer.step()


def full_bptt_single_sequence(cell, head, xs, y):
    h = None
    for x in xs:
        h = cell(x, h)
    F.mse_loss(head(h), y).backward()


def fresh_state_per_batch(model, loader, optimizer):
    for x, y in loader:
        hidden = model.init_hidden(x.size(1))
        out, hidden = model(x, hidden)
        F.cross_entropy(out, y).backward()
        optimizer.step()


@torch.no_grad()
def generate(model, token, steps):
    hidden = None
    tokens = []
    for _ in range(steps):
        logits, hidden = model(token, hidden)
        token = logits.argmax(-1)
        tokens.append(token)
    return tokens


def evaluate(model, loader):
    hidden = None
    total = 0.0
    with torch.no_grad():
        for x, y in loader:
            out, hidden = model(x, hidden)
            total += F.cross_entropy(out, y).item()
    return total


def encoder_decoder(encoder, decoder, loader, optimizer):
    for src, tgt in loader:
        out, h = encoder(src)
        outputs = []
        for t in range(tgt.size(0)):
            step_out, h = decoder(tgt[t], h)
            outputs.append(step_out)
        F.cross_entropy(torch.stack(outputs), tgt).backward()
        optimizer.step()


class StatefulTrainer:
    def __init__(self, optimizer):
        self.optimizer = optimizer
        self.hidden = None

    def on_train_batch_start(self):
        if self.hidden is not None:
            self.hidden = self.hidden.detach()

    def training_step(self, model, x, y):
        out, self.hidden = model(x, self.hidden)
        loss = F.mse_loss(out, y)
        loss.backward()
        self.optimizer.step()
        return loss.item()


class Detaching:
    def __init__(self, optimizer):
        self.optimizer = optimizer
        self.hidden = None

    def training_step(self, model, x, y):
        out, self.hidden = model(x, self.hidden)
        F.mse_loss(out, y).backward()
        self.optimizer.step()
        self.hidden = self.hidden.detach()


def not_a_module(tokenizer, texts, state):
    for text in texts:
        ids, state = tokenizer(text, state)
    return ids


def keyword_state(rnn, head, loader, optimizer):
    h = None
    for x, y in loader:
        if h is not None:
            h = h.detach()
        out, h = rnn(x, hx=h)
        F.mse_loss(head(out), y).backward()
        optimizer.step()
