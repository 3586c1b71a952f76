"""Sampling from a character-level GRU (in the style of spro/char-rnn.pytorch's generate.py):
the hidden state is fed back for every generated character with autograd on and no backward, so
each step's graph links to all earlier ones and a long sample exhausts GPU memory.

Source: spro/char-rnn.pytorch issue #4 ("generate.py using a lot of cuda memory during inference";
--predict_len 5000 runs out of 8 GB) and spro/practical-pytorch issue #28 ("volatile=True during
generation", PyTorch 0.3). Fix: generate under `torch.no_grad()` (volatile is a no-op since 0.4).
"""

import argparse
import string

import torch
import torch.nn as nn

all_characters = string.printable
n_characters = len(all_characters)


class CharRNN(nn.Module):
    def __init__(self, input_size, hidden_size, output_size, n_layers=2):
        super().__init__()
        self.n_layers = n_layers
        self.hidden_size = hidden_size
        self.encoder = nn.Embedding(input_size, hidden_size)
        self.rnn = nn.GRU(hidden_size, hidden_size, n_layers)
        self.decoder = nn.Linear(hidden_size, output_size)

    def forward(self, inp, hidden):
        output, hidden = self.rnn(self.encoder(inp.view(1, -1)), hidden)
        return self.decoder(output.view(1, -1)), hidden

    def init_hidden(self, batch_size):
        return torch.zeros(self.n_layers, batch_size, self.hidden_size)


def char_tensor(s):
    return torch.tensor([all_characters.index(c) for c in s], dtype=torch.long)


@torch.no_grad()
def generate(decoder, prime_str="A", predict_len=100, temperature=0.8, cuda=False):
    hidden = decoder.init_hidden(1)
    prime_input = char_tensor(prime_str).unsqueeze(0)
    if cuda:
        hidden = hidden.cuda()
        prime_input = prime_input.cuda()
    predicted = prime_str
    for p in range(len(prime_str) - 1):
        _, hidden = decoder(prime_input[:, p], hidden)
    inp = prime_input[:, -1]
    for p in range(predict_len):
        output, hidden = decoder(inp, hidden)
        output_dist = output.data.view(-1).div(temperature).exp()
        top_i = torch.multinomial(output_dist, 1)[0]
        predicted_char = all_characters[top_i]
        predicted += predicted_char
        inp = char_tensor(predicted_char).unsqueeze(0)
        if cuda:
            inp = inp.cuda()
    return predicted


if __name__ == "__main__":
    argparser = argparse.ArgumentParser()
    argparser.add_argument("filename", type=str)
    argparser.add_argument("-l", "--predict_len", type=int, default=100)
    argparser.add_argument("--cuda", action="store_true")
    args = argparser.parse_args()
    decoder = torch.load(args.filename)
    print(generate(decoder, predict_len=args.predict_len, cuda=args.cuda))
