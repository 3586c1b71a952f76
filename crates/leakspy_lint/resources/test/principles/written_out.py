# A module-level feature table filled for every batch and never written out or cleared: a
# process that keeps extracting keeps every entry. A checkpoint of it inside the loop bounds
# nothing.
import pickle

import torch
import torch.nn as nn

encoder = nn.Linear(16, 8)
opt = torch.optim.SGD(encoder.parameters(), lr=0.01)
features = {}
history = []

for i in range(100000):
    x = torch.randn(4, 16)
    feats = encoder(x)
    loss = feats.pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    features[i] = feats.detach().cpu()  # expect: LS014
    history.append(feats.detach().cpu())  # expect: LS014
    if i % 1000 == 0:
        with open("history.pkl", "wb") as f:
            pickle.dump(history, f)
