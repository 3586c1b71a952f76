# Module-level code (a script, a notebook) gets the exemptions code in a function gets: lists
# made afresh inside the epoch loop are reset every epoch.
import torch
import torch.nn as nn

model = nn.Linear(4, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
loader = [torch.randn(8, 4) for _ in range(10)]

for epoch in range(5):
    epoch_outputs = []
    for x in loader:
        out = model(x)
        loss = out.pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        epoch_outputs.append(out.detach().cuda())
        recent = []
        recent.append(out)
    print(torch.cat(epoch_outputs).mean())
