# A script that trains an encoder and keeps its features: the table it fills is what it writes
# out once, after the loop. It is the script's result, not a leak.
import torch
import torch.nn as nn

encoder = nn.Linear(16, 8)
opt = torch.optim.SGD(encoder.parameters(), lr=0.01)
path2feat = dict()

for i in range(100000):
    x = torch.randn(4, 16)
    feats = encoder(x)
    loss = feats.pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    path2feat[f"img{i}.jpg"] = feats.detach().cpu()

torch.save(path2feat, "features.pth")
